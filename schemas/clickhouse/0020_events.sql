-- events: one row per recorded event or goal (spec 2.3), written in batches
-- by the analytics stage from the sendstream.events.v1 topic.
--
-- Exactly once for readers, on ClickHouse 18.16 and current ClickHouse:
-- * Delivery is at least once, so a row may be inserted twice after a crash
--   or a redelivery; both copies carry the same id (the event id the API
--   answered with).
-- * ReplacingMergeTree() collapses copies with the same sorting key at merge
--   time; merges are eventual, so every query reads through
--   `LIMIT 1 BY id` (see ingest/events/README.md) and counts each id once
--   whether or not the copies were merged yet.
-- * Monthly partitions of occurred_at: retention drops whole partitions.
-- * No LowCardinality, DateTime64, Decimal or JSON types: 18.16 lacks them
--   (or needs experimental settings). value is Float64; round sums to the
--   currency's minor unit in queries.
CREATE TABLE IF NOT EXISTS events
(
    id          String,
    workspace   String,
    event       String,
    contact_id  String,
    email_hash  String,
    goal_type   String,
    value       Float64,
    has_value   UInt8,
    currency    String,
    external_id String,
    source      String,
    occurred_at DateTime,
    received_at DateTime,
    properties  String,
    inserted_at DateTime
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(occurred_at)
ORDER BY (workspace, event, occurred_at, id);
