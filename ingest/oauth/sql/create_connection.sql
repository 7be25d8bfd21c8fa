INSERT INTO oauth_connections (id, app_id, workspace_id, member_id, grant_type, scopes)
VALUES ($1, $2, $3, nullif($4, ''), $5, $6)
