-- $1 key_hash. One row per key, with its workspace.
SELECT k.id, k.key_hash, k.scopes, k.expires_at,
       w.id, w.name, w.plan, w.contact_limit, w.rate_multiplier, w.suspended
FROM api_keys k
JOIN workspaces w ON w.id = k.workspace_id
WHERE k.key_hash = $1
