-- The newest request-log rows of one workspace at or after a time (Unix
-- seconds), one row per id: ReplacingMergeTree collapses redeliveries only at
-- merge time, so LIMIT 1 BY id deduplicates what is not merged yet (cheaper
-- than FINAL, and the same on 18.16 and current ClickHouse).
SELECT id, at, method, path, status, duration_us, key_id, key_kind,
       request_body, response_body, truncated,
       message_ids, event_ids, journey_run_ids, contact_ids,
       recipient, external_id, ip, user_agent
FROM request_log
WHERE workspace = ? AND at >= toDateTime(?)
ORDER BY at DESC, id DESC
LIMIT 1 BY id
LIMIT ?
