-- Revocation at once (issue 27 item 1). Every change to what a credential
-- resolves to announces itself on the NOTIFY channel sendstream_auth, in
-- the transaction that makes it: Postgres delivers the notification when,
-- and only if, that transaction commits, to every process's
-- ingest/auth.Listener, which evicts the entries from its credential
-- caches. Triggers, so that every write path (admin CLI, dashboard, HTTP
-- API, a hand-typed UPDATE) does it. Payloads name ids only:
-- 'credential:<id>' (the id in auth.Identity.KeyID) or 'workspace:<id>'.
-- Idempotent.

-- sendstream_auth_notify() takes one argument, 'credential' or
-- 'workspace', and announces OLD.id under it. Tables added later (OAuth
-- tokens, app secrets) may use it too, or call auth.Invalidate.
CREATE OR REPLACE FUNCTION sendstream_auth_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('sendstream_auth', TG_ARGV[0] || ':' || OLD.id);
    RETURN NULL;
END
$$;

-- API keys: deleted, or changed in a column the cache holds. A column
-- added later that the cache does not read (say, last used) notifies
-- nothing.
DROP TRIGGER IF EXISTS api_keys_invalidate_delete ON api_keys;
CREATE TRIGGER api_keys_invalidate_delete AFTER DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION sendstream_auth_notify('credential');
DROP TRIGGER IF EXISTS api_keys_invalidate_update ON api_keys;
CREATE TRIGGER api_keys_invalidate_update AFTER UPDATE ON api_keys
    FOR EACH ROW
    WHEN (OLD.key_hash IS DISTINCT FROM NEW.key_hash
       OR OLD.workspace_id IS DISTINCT FROM NEW.workspace_id
       OR OLD.scopes IS DISTINCT FROM NEW.scopes
       OR OLD.expires_at IS DISTINCT FROM NEW.expires_at)
    EXECUTE FUNCTION sendstream_auth_notify('credential');

-- Tracking tokens, likewise.
DROP TRIGGER IF EXISTS tracking_tokens_invalidate_delete ON tracking_tokens;
CREATE TRIGGER tracking_tokens_invalidate_delete AFTER DELETE ON tracking_tokens
    FOR EACH ROW EXECUTE FUNCTION sendstream_auth_notify('credential');
DROP TRIGGER IF EXISTS tracking_tokens_invalidate_update ON tracking_tokens;
CREATE TRIGGER tracking_tokens_invalidate_update AFTER UPDATE ON tracking_tokens
    FOR EACH ROW
    WHEN (OLD.token_hash IS DISTINCT FROM NEW.token_hash
       OR OLD.workspace_id IS DISTINCT FROM NEW.workspace_id
       OR OLD.domains IS DISTINCT FROM NEW.domains)
    EXECUTE FUNCTION sendstream_auth_notify('credential');

-- Workspaces: suspended or resumed, plan, limits, name (every field of
-- auth.Identity that comes from the workspace), or deleted.
DROP TRIGGER IF EXISTS workspaces_invalidate_delete ON workspaces;
CREATE TRIGGER workspaces_invalidate_delete AFTER DELETE ON workspaces
    FOR EACH ROW EXECUTE FUNCTION sendstream_auth_notify('workspace');
DROP TRIGGER IF EXISTS workspaces_invalidate_update ON workspaces;
CREATE TRIGGER workspaces_invalidate_update AFTER UPDATE ON workspaces
    FOR EACH ROW
    WHEN (OLD.suspended IS DISTINCT FROM NEW.suspended
       OR OLD.plan IS DISTINCT FROM NEW.plan
       OR OLD.contact_limit IS DISTINCT FROM NEW.contact_limit
       OR OLD.rate_multiplier IS DISTINCT FROM NEW.rate_multiplier
       OR OLD.name IS DISTINCT FROM NEW.name)
    EXECUTE FUNCTION sendstream_auth_notify('workspace');
