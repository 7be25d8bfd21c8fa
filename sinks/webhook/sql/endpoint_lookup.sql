-- One endpoint for a delivery attempt: its URL, whether it is enabled and
-- its sealed secrets, and whether a run of failures is open. No row: unknown id or another workspace's.
SELECT url, enabled, secret_enc, previous_secret_enc, previous_expires_at, failing_since IS NOT NULL
FROM webhook_endpoints
WHERE workspace_id = $1 AND id = $2
