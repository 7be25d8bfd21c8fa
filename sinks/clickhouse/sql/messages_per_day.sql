-- How many messages of one workspace reached each status per day (UTC) at
-- or after a time (Unix seconds), from the message log's status changes:
-- uniqExact of the message id, so a redelivered change (same event, not
-- merged yet) counts once. Runs on 18.16 and current ClickHouse.
SELECT toDate(at) AS day, status, uniqExact(message_id) AS messages
FROM message_status
WHERE workspace = ? AND at >= toDateTime(?)
GROUP BY day, status
ORDER BY day, status
