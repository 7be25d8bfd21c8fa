-- $1 code hash, $2 app. Locks the code for the exchange.
SELECT member_id, scopes, redirect_uri, code_challenge, expires_at, used_at IS NOT NULL, coalesce(connection_id, '')
FROM oauth_codes WHERE code_hash = $1 AND app_id = $2 FOR UPDATE
