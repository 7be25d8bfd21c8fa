-- `sendstream admin requests`: a workspace's request-log rows since a time,
-- newest first. ReplacingMergeTree merges are eventual, so LIMIT 1 BY id
-- removes redelivered duplicates. Runs on ClickHouse 18.16 and current.
-- ? workspace, ? since (DateTime), ? limit
SELECT id, at, method, path, status, duration_us, key_id, key_kind,
       request_body, response_body, truncated,
       message_ids, event_ids, journey_run_ids, contact_ids,
       recipient, external_id, ip, user_agent
FROM
(
    SELECT id, at, method, path, status, duration_us, key_id, key_kind,
           request_body, response_body, truncated,
           message_ids, event_ids, journey_run_ids, contact_ids,
           recipient, external_id, ip, user_agent
    FROM request_log
    WHERE workspace = ? AND at >= ?
    ORDER BY at DESC, id
    LIMIT 1 BY id
)
LIMIT ?
