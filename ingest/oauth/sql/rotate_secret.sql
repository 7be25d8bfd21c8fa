-- $1 workspace, $2 app, $3 new secret hash. Public apps have no secret.
UPDATE oauth_apps SET secret_hash = $3
WHERE workspace_id = $1 AND id = $2 AND client_type = 'confidential'
