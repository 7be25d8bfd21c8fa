-- The migration ledger (also schemas/clickhouse/0000_init.sql).
CREATE TABLE IF NOT EXISTS schema_migrations
(
    name       String,
    applied_at DateTime
)
ENGINE = MergeTree()
ORDER BY name
