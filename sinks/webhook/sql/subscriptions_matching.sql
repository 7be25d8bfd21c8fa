-- The REST hook subscriptions of a workspace to one event type (the fan-out).
SELECT id, target_url FROM webhook_subscriptions
WHERE workspace_id = $1 AND event = $2
ORDER BY id
