-- $1 id, $2 token_hash, $3 login id, $4 member id, $5 now, $6 expires_at,
-- $7 ip, $8 user agent
INSERT INTO sessions (id, token_hash, login_id, member_id, created_at, last_seen_at, expires_at, ip, user_agent)
VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8)
