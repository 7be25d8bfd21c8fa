-- $6 the access token's scopes when narrower than its connection's (a
-- refresh asking for fewer, RFC 6749 section 6); NULL means the
-- connection's.
INSERT INTO oauth_tokens (id, token_hash, kind, connection_id, expires_at, scopes)
VALUES ($1, $2, $3, $4, $5, $6)
