-- request_log: one row per authenticated API call (spec 8.3), written in
-- batches by the requestlog stage from the sendstream.requestlog.v1 topic.
--
-- Runs on ClickHouse 18.16 and current ClickHouse:
-- * ReplacingMergeTree() collapses at-least-once redeliveries: a redelivered
--   envelope has the same id, workspace and at, so the same sorting key.
--   Merges are eventual, so readers deduplicate with LIMIT 1 BY id.
-- * One partition per day of `at`, so the 90-day retention drops whole
--   partitions (ALTER TABLE ... DROP PARTITION ID); 18.16 has no TTL.
-- * No LowCardinality, DateTime64 or TTL: 18.16 lacks them.
CREATE TABLE IF NOT EXISTS request_log
(
    id              String,
    workspace       String,
    at              DateTime,
    method          String,
    path            String,
    status          UInt16,
    duration_us     UInt64,
    key_id          String,
    key_kind        String,
    request_body    String,
    response_body   String,
    truncated       UInt8,
    message_ids     Array(String),
    event_ids       Array(String),
    journey_run_ids Array(String),
    contact_ids     Array(String),
    recipient       String,
    external_id     String,
    ip              String,
    user_agent      String,
    received        DateTime
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(at)
ORDER BY (workspace, at, id)
