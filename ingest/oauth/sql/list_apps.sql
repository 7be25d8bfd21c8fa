-- $1 workspace.
SELECT id, workspace_id, name, client_id, client_type, secret_hash, grants, scopes, redirect_uris, coalesce(created_by, ''),
       (SELECT w.suspended FROM workspaces w WHERE w.id = oauth_apps.workspace_id)
FROM oauth_apps WHERE workspace_id = $1 ORDER BY created_at, id
