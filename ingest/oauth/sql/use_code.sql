UPDATE oauth_codes SET used_at = now(), connection_id = $2 WHERE code_hash = $1
