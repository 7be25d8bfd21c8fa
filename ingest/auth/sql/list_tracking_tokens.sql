-- $1 workspace id: its tracking tokens, newest first (never the hash).
SELECT id, token_hint, domains, created_at
FROM tracking_tokens
WHERE workspace_id = $1
ORDER BY created_at DESC, id DESC
