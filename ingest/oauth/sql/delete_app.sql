DELETE FROM oauth_apps WHERE workspace_id = $1 AND id = $2
