-- The subscriptions of a workspace to one event type (for the fan-out).
SELECT id, target_url, created_at FROM webhook_subscriptions
WHERE workspace_id = $1 AND event = $2
ORDER BY id
