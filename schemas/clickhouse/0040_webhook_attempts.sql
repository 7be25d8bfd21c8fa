-- webhook_attempts: the webhook delivery log (issue 25, item 8), one row per
-- delivery attempt, written in batches by the webhooklog stage from the
-- webhook.attempt.v1 envelopes the delivery stage publishes.
--
-- Runs on ClickHouse 18.16 and current ClickHouse: ReplacingMergeTree()
-- collapses at-least-once redeliveries (a redelivered envelope has the same
-- event_id, workspace and at); readers deduplicate with LIMIT 1 BY event_id
-- until merges run. Monthly partitions of `at`, so retention drops whole
-- partitions. No LowCardinality, DateTime64, TTL or Map. target_kind is
-- `endpoint` (a dashboard endpoint) or `subscription` (a REST hook);
-- next_attempt_at is 0 (1970-01-01) when no attempt follows.
CREATE TABLE IF NOT EXISTS webhook_attempts
(
    event_id        String,
    workspace       String,
    target_kind     String,
    target_id       String,
    url             String,
    event           String,
    message_id      String,
    attempt         UInt32,
    outcome         String,
    status_code     UInt16,
    duration_ms     Float64,
    error           String,
    next_attempt_at DateTime,
    at              DateTime,
    replay          UInt8,
    received        DateTime
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (workspace, at, event_id)
