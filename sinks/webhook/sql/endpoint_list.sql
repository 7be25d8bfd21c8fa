-- The endpoints of a workspace, oldest first, without their secrets.
SELECT id, url, events, enabled, disabled_reason, disabled_at, failing_since,
       previous_expires_at, created_at, updated_at
FROM webhook_endpoints
WHERE workspace_id = $1
ORDER BY created_at, id
