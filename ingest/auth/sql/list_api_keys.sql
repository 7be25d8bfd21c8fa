-- $1 workspace id: its API keys, newest first (never the hash).
SELECT id, name, key_hint, scopes, expires_at, created_at
FROM api_keys
WHERE workspace_id = $1
ORDER BY created_at DESC, id DESC
