-- $1 token_hash. One row per token, with its workspace.
SELECT t.id, t.token_hash, t.domains,
       w.id, w.name, w.plan, w.contact_limit, w.rate_multiplier, w.suspended
FROM tracking_tokens t
JOIN workspaces w ON w.id = t.workspace_id
WHERE t.token_hash = $1
