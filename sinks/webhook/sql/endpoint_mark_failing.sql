-- Records that an endpoint is failing since $3, unless an earlier failure
-- of the same run is already recorded; returns the start of the run. No
-- row: unknown id or another workspace's.
UPDATE webhook_endpoints
SET failing_since = COALESCE(failing_since, $3)
WHERE workspace_id = $1 AND id = $2
RETURNING failing_since
