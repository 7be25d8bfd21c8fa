-- $1 connection. Revoked connections' tokens resolve to nothing.
UPDATE oauth_connections SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1
