-- A receiver answered 410 Gone: the REST hook is deleted (spec 6).
DELETE FROM webhook_subscriptions
WHERE workspace_id = $1 AND id = $2
