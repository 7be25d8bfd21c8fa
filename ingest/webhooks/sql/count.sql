-- How many subscriptions a workspace has.
SELECT count(*) FROM webhook_subscriptions WHERE workspace_id = $1
