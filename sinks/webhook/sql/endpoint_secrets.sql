-- The sealed secrets of one endpoint. No row: unknown id or another
-- workspace's.
SELECT secret_enc, previous_secret_enc, previous_expires_at
FROM webhook_endpoints
WHERE workspace_id = $1 AND id = $2
