-- Creates a dashboard endpoint: $5 is its sealed secret, $6 the time.
INSERT INTO webhook_endpoints (id, workspace_id, url, events, secret_enc, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $6)
