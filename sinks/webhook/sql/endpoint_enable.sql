-- Enables an endpoint again: the disable reason and the failing run are
-- forgotten, so the 12-hour clock starts afresh. No row: unknown id or
-- another workspace's.
UPDATE webhook_endpoints
SET enabled = true, disabled_reason = NULL, disabled_at = NULL, failing_since = NULL, updated_at = $3
WHERE workspace_id = $1 AND id = $2
RETURNING id, url, events, enabled, disabled_reason, disabled_at, failing_since,
          previous_expires_at, created_at, updated_at
