INSERT INTO oauth_apps (id, workspace_id, name, client_id, client_type, secret_hash, grants, scopes, redirect_uris, created_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
