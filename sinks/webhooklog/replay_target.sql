-- Every message published for one target whose first attempt was due at or
-- after a time (Unix seconds), oldest first, as replay_message.sql reads
-- them. Parameters: workspace, target id, time.
SELECT message_id, target_id, argMax(target_kind, attempt), argMax(url, attempt),
       argMax(event, attempt), min(first_at) AS first, max(attempt),
       argMax(body, attempt)
FROM webhook_messages
WHERE workspace = ? AND target_id = ? AND first_at >= toDateTime(?)
GROUP BY message_id, target_id
ORDER BY first, message_id
