-- The enabled endpoints of a workspace that want one event type (for the
-- fan-out), without their secrets.
SELECT id, url, events, enabled, disabled_reason, disabled_at, failing_since,
       previous_expires_at, created_at, updated_at
FROM webhook_endpoints
WHERE workspace_id = $1 AND enabled AND $2 = ANY (events)
ORDER BY created_at, id
