-- $1 id, $2 workspace id, $3 name, $4 key_hash, $5 key_hint, $6 scopes, $7 expires_at (NULL = never)
INSERT INTO api_keys (id, workspace_id, name, key_hash, key_hint, scopes, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
