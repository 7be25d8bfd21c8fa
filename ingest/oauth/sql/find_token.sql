-- $1 token hash. The token, its connection and app, locked for a refresh.
SELECT t.id, t.kind, t.expires_at, t.replaced_at IS NOT NULL, c.id, c.app_id, c.revoked_at IS NOT NULL,
       coalesce(c.member_id, ''), c.scopes
FROM oauth_tokens t JOIN oauth_connections c ON c.id = t.connection_id
WHERE t.token_hash = $1
FOR UPDATE OF t
