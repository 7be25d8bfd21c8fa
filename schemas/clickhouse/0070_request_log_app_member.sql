-- request_log: the OAuth app and the member of a call made with an OAuth
-- access token (issue 27 item 5: "the request log recording the app and
-- the member"); '' for API keys and tracking tokens, and for rows written
-- before this migration.
--
-- ClickHouse 18.16 has plain ADD COLUMN (no IF NOT EXISTS): Migrate
-- accepts the "already exists" answer of a repeated run, so each column
-- is its own statement (one ALTER with both would stop at the first that
-- exists and never add the second).
ALTER TABLE request_log ADD COLUMN app_id String DEFAULT '' AFTER key_kind;
ALTER TABLE request_log ADD COLUMN member_id String DEFAULT '' AFTER app_id;
