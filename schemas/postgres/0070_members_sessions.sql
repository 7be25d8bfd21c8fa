-- Members and sign-in (ingest/members, issue 27 item 2).
--
-- A person signs in once, with one email and one password, and may belong
-- to several workspaces, as on the peers' dashboards (one account, many
-- teams): `logins` holds the email (unique across the service) and the
-- argon2id hash; `members` is one login's membership of one workspace with
-- its role and named permissions. Sessions are server-side rows keyed by
-- the SHA-256 of a random token that only the browser's cookie holds.

CREATE TABLE IF NOT EXISTS logins (
    id            text PRIMARY KEY,
    -- Normalised (trimmed, lower-cased); unique across workspaces.
    email         text NOT NULL UNIQUE,
    -- PHC-format argon2id hash; the password itself is never stored.
    password_hash text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Members created before this migration keep their (oldest) password.
INSERT INTO logins (id, email, password_hash, created_at)
SELECT DISTINCT ON (email) id, email, password_hash, created_at
  FROM members ORDER BY email, created_at
ON CONFLICT (email) DO NOTHING;

ALTER TABLE members ADD COLUMN IF NOT EXISTS login_id text REFERENCES logins (id) ON DELETE CASCADE;
UPDATE members m SET login_id = l.id FROM logins l WHERE l.email = m.email AND m.login_id IS NULL;
ALTER TABLE members ALTER COLUMN login_id SET NOT NULL;
ALTER TABLE members DROP COLUMN IF EXISTS password_hash;
-- Named permissions beyond the role's (member, custom); see members.Can.
ALTER TABLE members ADD COLUMN IF NOT EXISTS permissions text[] NOT NULL DEFAULT '{}';
ALTER TABLE members DROP CONSTRAINT IF EXISTS members_role_check;
ALTER TABLE members ADD CONSTRAINT members_role_check
    CHECK (role IN ('owner', 'admin', 'member', 'custom', 'support'));
CREATE INDEX IF NOT EXISTS members_login ON members (login_id);

CREATE TABLE IF NOT EXISTS sessions (
    id           text PRIMARY KEY,
    -- SHA-256 of the cookie's token; the token itself is never stored.
    token_hash   bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    login_id     text NOT NULL REFERENCES logins (id) ON DELETE CASCADE,
    -- The membership (workspace) the session acts in.
    member_id    text NOT NULL REFERENCES members (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    -- Absolute end; the idle timeout counts from last_seen_at.
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    ip           text NOT NULL DEFAULT '',
    user_agent   text NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS sessions_login ON sessions (login_id);

-- Failed sign-ins per key ("account:<email>" or "address:<ip>") in a fixed
-- window that starts at the first failure. UNLOGGED like rate_windows: a
-- Postgres crash only forgets recent failures.
CREATE UNLOGGED TABLE IF NOT EXISTS login_failures (
    key          text PRIMARY KEY,
    window_start timestamptz NOT NULL,
    failures     integer NOT NULL
);

-- Invitations to a workspace: the token (shown once, sent to the invitee)
-- is stored as its SHA-256.
CREATE TABLE IF NOT EXISTS member_invitations (
    id           text PRIMARY KEY,
    workspace_id text NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    email        text NOT NULL,
    role         text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'custom', 'support')),
    permissions  text[] NOT NULL DEFAULT '{}',
    token_hash   bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    invited_by   text REFERENCES members (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    accepted_at  timestamptz
);
CREATE INDEX IF NOT EXISTS member_invitations_workspace ON member_invitations (workspace_id);
