-- Removes an endpoint. No row: unknown id or another workspace's.
DELETE FROM webhook_endpoints WHERE workspace_id = $1 AND id = $2
RETURNING id
