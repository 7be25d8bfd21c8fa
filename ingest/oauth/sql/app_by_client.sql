-- $1 client_id.
SELECT id, workspace_id, name, client_id, client_type, secret_hash, grants, scopes, redirect_uris, coalesce(created_by, '')
FROM oauth_apps WHERE client_id = $1
