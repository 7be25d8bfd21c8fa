-- The migration ledger. sinks/clickhouse also creates it before reading it, so
-- this file only documents its shape; every later migration is recorded here.
-- Two processes migrating at once may both record a name: readers use DISTINCT.
CREATE TABLE IF NOT EXISTS schema_migrations
(
    name       String,
    applied_at DateTime
)
ENGINE = MergeTree()
ORDER BY name
