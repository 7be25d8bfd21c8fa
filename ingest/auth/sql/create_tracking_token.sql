-- $1 id, $2 workspace id, $3 token_hash, $4 token_hint, $5 domains
INSERT INTO tracking_tokens (id, workspace_id, token_hash, token_hint, domains)
VALUES ($1, $2, $3, $4, $5)
