-- $1 access token id: revoked by RFC 7009; it resolves as expired.
UPDATE oauth_tokens SET expires_at = least(expires_at, now()) WHERE id = $1
