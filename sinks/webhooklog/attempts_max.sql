-- The highest attempt number logged per (message, target) of some messages
-- of one workspace: the delivery stage makes its quick retries inside one
-- delivery envelope, so the log can be ahead of webhook_messages.
-- Parameters: workspace, message ids.
SELECT message_id, target_id, max(attempt)
FROM webhook_attempts
WHERE workspace = ? AND has(?, message_id)
GROUP BY message_id, target_id
