-- $1 workspace, $2 app id.
SELECT id, workspace_id, name, client_id, client_type, secret_hash, grants, scopes, redirect_uris, coalesce(created_by, ''),
       (SELECT w.suspended FROM workspaces w WHERE w.id = oauth_apps.workspace_id)
FROM oauth_apps WHERE workspace_id = $1 AND id = $2
