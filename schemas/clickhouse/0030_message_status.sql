-- message_status: one row per status change of a transactional message
-- (queued, sent, delivered, bounced, complained, failed), written in batches
-- by the messagelog stage from transactional.send.v1 and
-- transactional.status.v1 envelopes.
--
-- Runs on ClickHouse 18.16 and current ClickHouse: ReplacingMergeTree()
-- collapses at-least-once redeliveries (a redelivered envelope has the same
-- event_id, workspace and at); readers deduplicate with LIMIT 1 BY event_id
-- until merges run. Monthly partitions. No LowCardinality, DateTime64, TTL.
CREATE TABLE IF NOT EXISTS message_status
(
    event_id    String,
    workspace   String,
    message_id  String,
    status      String,
    at          DateTime,
    recipient   String,
    external_id String,
    template_id String,
    policy_id   String,
    provider    String,
    detail      String,
    received    DateTime
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (workspace, at, event_id)
