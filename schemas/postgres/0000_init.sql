-- The migration ledger. sinks/postgres also creates it before reading it, so
-- this file only documents its shape; every later migration is recorded here.
CREATE TABLE IF NOT EXISTS schema_migrations (
    name       text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
