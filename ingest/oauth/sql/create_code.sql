INSERT INTO oauth_codes (code_hash, app_id, workspace_id, member_id, scopes, redirect_uri, code_challenge, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
