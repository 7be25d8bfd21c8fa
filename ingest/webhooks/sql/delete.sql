-- Removes one subscription of a workspace; no row when the id is unknown
-- or belongs to another workspace.
DELETE FROM webhook_subscriptions WHERE workspace_id = $1 AND id = $2
RETURNING event, target_url, created_at
