-- One REST hook subscription of a workspace (the delivery checks it still exists).
SELECT target_url FROM webhook_subscriptions
WHERE workspace_id = $1 AND id = $2
