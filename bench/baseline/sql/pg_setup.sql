-- FROZEN: scratch table of the Postgres baselines, shaped like a contacts
-- table (uuid key, unique per workspace and email). Emptied before each run
-- so every run starts from the same size.
CREATE SCHEMA IF NOT EXISTS bench_baseline;
CREATE TABLE IF NOT EXISTS bench_baseline.contacts (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id text NOT NULL,
    email        text NOT NULL,
    first_name   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, email)
);
TRUNCATE bench_baseline.contacts;
