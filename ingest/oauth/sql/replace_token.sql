UPDATE oauth_tokens SET replaced_at = now() WHERE id = $1
