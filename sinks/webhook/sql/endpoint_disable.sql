-- Disables an endpoint with a reason. An endpoint already disabled keeps
-- its first reason and time. No row: unknown id or another workspace's.
UPDATE webhook_endpoints
SET enabled = false,
    disabled_reason = CASE WHEN enabled THEN $3 ELSE disabled_reason END,
    disabled_at = CASE WHEN enabled THEN $4 ELSE disabled_at END,
    updated_at = $4
WHERE workspace_id = $1 AND id = $2
RETURNING id, url, events, enabled, disabled_reason, disabled_at, failing_since,
          previous_expires_at, created_at, updated_at
