-- $1 login id, $2 now, $3 idle cut-off: forget the login's ended sessions
-- (run at each sign-in, so a login's rows stay few)
DELETE FROM sessions
 WHERE login_id = $1 AND (revoked_at IS NOT NULL OR expires_at < $2 OR last_seen_at < $3)
