-- $1 access token hash. Only tokens of live connections resolve; a token's
-- own scopes (a narrowed refresh) replace its connection's.
SELECT t.token_hash, t.expires_at, c.id, coalesce(t.scopes, c.scopes), coalesce(c.member_id, ''), a.id, a.name,
       w.id, w.name, w.plan, w.contact_limit, w.rate_multiplier, w.suspended
FROM oauth_tokens t
JOIN oauth_connections c ON c.id = t.connection_id AND c.revoked_at IS NULL
JOIN oauth_apps a ON a.id = c.app_id
JOIN workspaces w ON w.id = c.workspace_id
WHERE t.token_hash = $1 AND t.kind = 'access'
