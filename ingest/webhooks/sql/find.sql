-- The subscription of a workspace for one event and target URL, if any.
SELECT id, created_at FROM webhook_subscriptions
WHERE workspace_id = $1 AND event = $2 AND target_url = $3
