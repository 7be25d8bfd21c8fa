-- OAuth follow-ups (issue 27, ingest/oauth).
--
-- An access token may carry fewer scopes than its connection: a refresh
-- with a narrower `scope` (RFC 6749 section 6) issues one with only those.
-- NULL means the connection's scopes (every token issued before this
-- migration, and every refresh token: RFC 6749 section 6 keeps a refresh
-- token's scope identical to the one presented).
ALTER TABLE oauth_tokens ADD COLUMN IF NOT EXISTS scopes text[];

-- A connection removed by a cascade (its member deleted, which deletes the
-- member's connections and their tokens) announces itself to every
-- process's credential cache, like a revocation (auth.Invalidate): the
-- connection's id is the Identity.KeyID of each of its access tokens.
-- Deleting an app or a workspace announces its connections already; the
-- trigger makes every delete path do it, whatever code writes it.
DROP TRIGGER IF EXISTS oauth_connections_invalidate_delete ON oauth_connections;
CREATE TRIGGER oauth_connections_invalidate_delete AFTER DELETE ON oauth_connections
    FOR EACH ROW EXECUTE FUNCTION sendstream_auth_notify('credential');
