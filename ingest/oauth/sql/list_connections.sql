-- $1 workspace: the live (not revoked) connections of its apps, newest
-- first, with the app's name, the member's email ('' for client_credentials
-- issuances, which act as the app itself) and when the connection last got
-- a token (access or refresh; NULL when it has none).
SELECT c.id, c.app_id, a.name, coalesce(c.member_id, ''), coalesce(m.email, ''), c.grant_type, c.scopes, c.created_at,
       (SELECT max(t.created_at) FROM oauth_tokens t WHERE t.connection_id = c.id)
FROM oauth_connections c
JOIN oauth_apps a ON a.id = c.app_id
LEFT JOIN members m ON m.id = c.member_id
WHERE c.workspace_id = $1 AND c.revoked_at IS NULL
ORDER BY c.created_at DESC, c.id DESC
