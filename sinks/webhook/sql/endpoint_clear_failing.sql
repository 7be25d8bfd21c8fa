-- Ends an endpoint's run of failures (a delivery succeeded).
UPDATE webhook_endpoints
SET failing_since = NULL
WHERE workspace_id = $1 AND id = $2 AND failing_since IS NOT NULL
