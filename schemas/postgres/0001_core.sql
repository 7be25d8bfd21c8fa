-- Core tenancy and credentials: workspaces, members, API keys, tracking
-- tokens, and the shared per-minute rate-limit counters. Idempotent.

CREATE TABLE IF NOT EXISTS workspaces (
    id              text PRIMARY KEY,
    name            text NOT NULL,
    plan            text NOT NULL DEFAULT 'free' CHECK (plan IN ('free', 'pro', 'enterprise')),
    -- Contacts the workspace may hold; 0 means unlimited.
    contact_limit   bigint NOT NULL DEFAULT 1000 CHECK (contact_limit >= 0),
    -- Multiplies every per-minute rate limit (enterprise, benchmarks).
    rate_multiplier bigint NOT NULL DEFAULT 1 CHECK (rate_multiplier >= 1),
    suspended       boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS members (
    id            text PRIMARY KEY,
    workspace_id  text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    email         text NOT NULL,
    -- PHC-format argon2id hash; the password itself is never stored.
    password_hash text NOT NULL,
    role          text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, email)
);

CREATE TABLE IF NOT EXISTS api_keys (
    id           text PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name         text NOT NULL DEFAULT '',
    -- SHA-256 of the full key; the key itself is shown once and never stored.
    key_hash     bytea NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    -- Prefix and last four characters, to recognise a key in a list.
    key_hint     text NOT NULL,
    -- Empty means full access.
    scopes       text[] NOT NULL DEFAULT '{}',
    expires_at   timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS api_keys_workspace ON api_keys (workspace_id);

CREATE TABLE IF NOT EXISTS tracking_tokens (
    id           text PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    token_hash   bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    token_hint   text NOT NULL,
    -- Allowed browser origins' hosts; empty allows every origin.
    domains      text[] NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS tracking_tokens_workspace ON tracking_tokens (workspace_id);

-- Fixed one-minute windows shared by every ingest process. UNLOGGED: the
-- counters are hot and short-lived; a Postgres crash resets the current
-- minute, which only ever errs towards allowing a few more calls once.
CREATE UNLOGGED TABLE IF NOT EXISTS rate_windows (
    workspace_id text   NOT NULL,
    endpoint     text   NOT NULL,
    -- Unix minute (seconds since the epoch / 60) the window starts at.
    window_min   bigint NOT NULL,
    used         bigint NOT NULL,
    PRIMARY KEY (workspace_id, endpoint, window_min)
);
CREATE INDEX IF NOT EXISTS rate_windows_window ON rate_windows (window_min);
