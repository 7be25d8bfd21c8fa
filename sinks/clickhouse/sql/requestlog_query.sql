-- The newest request-log rows of one workspace at or after a time (Unix
-- seconds), one row per id: ReplacingMergeTree collapses redeliveries only at
-- merge time, so LIMIT 1 BY id deduplicates what is not merged yet (cheaper
-- than FINAL, and the same on 18.16 and current ClickHouse).
-- Optional filters (0 or '' means none), each a bound parameter: the exact
-- status, the status class (4 for 4xx), a substring of the path, the key id.
SELECT id, at, method, path, status, duration_us, key_id, key_kind, app_id, member_id,
       request_body, response_body, truncated,
       message_ids, event_ids, journey_run_ids, contact_ids,
       recipient, external_id, ip, user_agent
FROM request_log
WHERE workspace = ? AND at >= toDateTime(?)
  AND (? = 0 OR status = ?)
  AND (? = 0 OR intDiv(status, 100) = ?)
  AND (? = '' OR position(path, ?) > 0)
  AND (? = '' OR key_id = ?)
ORDER BY at DESC, id DESC
LIMIT 1 BY id
LIMIT ?
