-- $1 workspace.
SELECT id, workspace_id, name, client_id, client_type, secret_hash, grants, scopes, redirect_uris, coalesce(created_by, '')
FROM oauth_apps WHERE workspace_id = $1 ORDER BY created_at, id
