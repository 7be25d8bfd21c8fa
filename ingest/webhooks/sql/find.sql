-- The subscription of a workspace for one event and target URL, if any
-- (through the unique index on the URL's digest).
SELECT id, created_at FROM webhook_subscriptions
WHERE workspace_id = $1 AND event = $2 AND md5(target_url) = md5($3) AND target_url = $3
