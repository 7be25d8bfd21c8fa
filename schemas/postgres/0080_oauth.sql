-- OAuth 2.0 apps and the authorization server's grants (ingest/oauth,
-- issue 27 items 4-5, spec 5.3). Every secret, code and token is stored
-- only as its SHA-256; the plain value is shown once.

CREATE TABLE IF NOT EXISTS oauth_apps (
    id            text PRIMARY KEY,
    workspace_id  text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name          text NOT NULL,
    -- The public client identifier (ss_client_…); unique across workspaces.
    client_id     text NOT NULL UNIQUE,
    client_type   text NOT NULL CHECK (client_type IN ('confidential', 'public')),
    -- SHA-256 of the client secret; NULL for public clients.
    secret_hash   bytea CHECK (secret_hash IS NULL OR length(secret_hash) = 32),
    grants        text[] NOT NULL,
    scopes        text[] NOT NULL,
    redirect_uris text[] NOT NULL DEFAULT '{}',
    -- The member client_credentials tokens act as (spec 5.3: the app's creator).
    created_by    text REFERENCES members (id) ON DELETE SET NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((client_type = 'public') = (secret_hash IS NULL))
);
CREATE INDEX IF NOT EXISTS oauth_apps_workspace ON oauth_apps (workspace_id);

-- A connection is one grant: a member's consent (authorization_code, with
-- its chain of refresh tokens) or one client_credentials issuance. Revoking
-- it revokes every token it issued.
CREATE TABLE IF NOT EXISTS oauth_connections (
    id           text PRIMARY KEY,
    app_id       text NOT NULL REFERENCES oauth_apps (id) ON DELETE CASCADE,
    workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    member_id    text REFERENCES members (id) ON DELETE CASCADE,
    grant_type   text NOT NULL,
    scopes       text[] NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);
CREATE INDEX IF NOT EXISTS oauth_connections_app ON oauth_connections (app_id);

-- Authorization codes: single use (used_at), short-lived (expires_at). A
-- second use revokes the connection the first one created.
CREATE TABLE IF NOT EXISTS oauth_codes (
    code_hash      bytea PRIMARY KEY CHECK (length(code_hash) = 32),
    app_id         text NOT NULL REFERENCES oauth_apps (id) ON DELETE CASCADE,
    workspace_id   text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    member_id      text NOT NULL REFERENCES members (id) ON DELETE CASCADE,
    scopes         text[] NOT NULL,
    redirect_uri   text NOT NULL,
    code_challenge text NOT NULL DEFAULT '',
    expires_at     timestamptz NOT NULL,
    used_at        timestamptz,
    connection_id  text REFERENCES oauth_connections (id) ON DELETE CASCADE
);

-- Access tokens (kind 'access', ss_oat_…) and refresh tokens (kind
-- 'refresh', ss_ort_…). A refresh token is replaced on every use
-- (replaced_at); presenting a replaced one revokes the connection.
CREATE TABLE IF NOT EXISTS oauth_tokens (
    id            text PRIMARY KEY,
    token_hash    bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    kind          text NOT NULL CHECK (kind IN ('access', 'refresh')),
    connection_id text NOT NULL REFERENCES oauth_connections (id) ON DELETE CASCADE,
    expires_at    timestamptz NOT NULL,
    replaced_at   timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS oauth_tokens_connection ON oauth_tokens (connection_id);
