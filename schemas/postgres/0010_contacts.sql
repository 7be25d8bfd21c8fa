-- Contacts, custom field definitions and the counters that keep
-- GET /v1/contacts fast at a million contacts (ingest/contacts owns them).
--
-- Order: "newest first" is descending seq, a per-workspace creation number
-- handed out under the workspace's contact_stats row lock (so it never
-- repeats in a workspace; gaps are harmless). contact_buckets counts the
-- contacts per (workspace, status, seq >> 10): a page at any depth first
-- finds its 1024-wide bucket from these counts, then skips at most ~1024 index
-- entries, and `total` is their sum. Every writer keeps them exact in the same
-- transaction: ingest/contacts on insert, the triggers of 0012 on status
-- changes and deletes by anyone.

CREATE TABLE IF NOT EXISTS contacts (
    id            text PRIMARY KEY,
    workspace_id  text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    seq           bigint NOT NULL,
    -- Trimmed and lower-cased by the application; unique per workspace.
    email         text NOT NULL,
    first_name    text,
    country       text,
    language      text,
    status        text NOT NULL DEFAULT 'ACTIVE'
                  CHECK (status IN ('ACTIVE', 'UNSUBSCRIBED', 'BOUNCED', 'COMPLAINED', 'PENDING')),
    -- Written only at creation.
    source        text,
    metadata      jsonb,
    -- Values of the workspace's custom fields, by key.
    custom_fields jsonb NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT contacts_workspace_email UNIQUE (workspace_id, email)
);
CREATE UNIQUE INDEX IF NOT EXISTS contacts_workspace_seq ON contacts (workspace_id, seq DESC);
CREATE INDEX IF NOT EXISTS contacts_workspace_status_seq ON contacts (workspace_id, status, seq DESC);

-- One row per workspace that has ever had a contact. Creating contacts locks
-- it first (the plan limit check and seq allocation); total is the number of
-- contacts, last_seq the highest seq handed out.
CREATE TABLE IF NOT EXISTS contact_stats (
    workspace_id text PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    total        bigint NOT NULL DEFAULT 0,
    last_seq     bigint NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS contact_buckets (
    workspace_id text   NOT NULL,
    status       text   NOT NULL,
    bucket       bigint NOT NULL, -- seq >> 10
    n            bigint NOT NULL,
    PRIMARY KEY (workspace_id, status, bucket)
);

-- The workspace's custom field settings: only these keys are stored from
-- customFields, and values must match the type.
CREATE TABLE IF NOT EXISTS custom_fields (
    workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    key          text NOT NULL CHECK (key ~ '^[A-Za-z][A-Za-z0-9_]{0,63}$'),
    type         text NOT NULL DEFAULT 'string' CHECK (type IN ('string', 'number', 'boolean', 'date')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, key)
);
