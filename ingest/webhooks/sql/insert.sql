-- A new subscription ($1 id, $2 workspace, $3 event, $4 target URL).
INSERT INTO webhook_subscriptions (id, workspace_id, event, target_url)
VALUES ($1, $2, $3, $4)
RETURNING created_at
