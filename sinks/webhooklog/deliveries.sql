-- The newest webhook attempts of one workspace, one row per attempt
-- envelope (LIMIT 1 BY event_id deduplicates what the ReplacingMergeTree
-- has not merged yet). Filters, each skipped when its parameter is empty:
-- target id; event type; outcome class, 'ok' (outcome ok) or 'failed'
-- (every other outcome). Parameters: workspace, target id twice, event
-- twice, class twice, limit.
SELECT event_id, target_kind, target_id, url, event, message_id, attempt,
       outcome, status_code, duration_ms, error, next_attempt_at, at, replay
FROM webhook_attempts
WHERE workspace = ?
  AND (? = '' OR target_id = ?)
  AND (? = '' OR event = ?)
  AND (? = '' OR (outcome = 'ok') = (? = 'ok'))
ORDER BY at DESC, attempt DESC, event_id
LIMIT 1 BY event_id
LIMIT ?
