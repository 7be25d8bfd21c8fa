-- webhook_messages: the body of every webhook message per target, so that
-- `admin webhook replay` can send it again with the same webhook-id (issue
-- 25, item 8). Written in batches by the webhookbodies stage from the
-- webhook.delivery.v1 envelopes on the deliveries topic: every attempt of
-- one (message, target) carries the same body, first_at and key.
--
-- Runs on ClickHouse 18.16 and current ClickHouse: ReplacingMergeTree(attempt)
-- keeps, per (workspace, target_id, message_id), the row of the highest
-- attempt number published, the number a replay continues from; readers
-- aggregate with max(attempt) and any(body) until merges run. Monthly
-- partitions of first_at (the same for every attempt of a message and
-- target, so its copies share a partition and collapse), so retention drops
-- whole partitions. No LowCardinality, DateTime64, TTL or Map.
CREATE TABLE IF NOT EXISTS webhook_messages
(
    workspace   String,
    target_id   String,
    message_id  String,
    target_kind String,
    url         String,
    event       String,
    first_at    DateTime,
    attempt     UInt32,
    body        String,
    received    DateTime
)
ENGINE = ReplacingMergeTree(attempt)
PARTITION BY toYYYYMM(first_at)
ORDER BY (workspace, target_id, message_id)
