INSERT INTO oauth_tokens (id, token_hash, kind, connection_id, expires_at)
VALUES ($1, $2, $3, $4, $5)
