-- $1 workspace, $2 app: revokes every connection of the app and returns
-- the ids of all of them (each is an Identity.KeyID to evict).
UPDATE oauth_connections SET revoked_at = coalesce(revoked_at, now())
WHERE app_id = $2 AND workspace_id = $1
RETURNING id
