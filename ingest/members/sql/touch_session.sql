-- $1 session id, $2 now
UPDATE sessions SET last_seen_at = $2 WHERE id = $1 AND last_seen_at < $2
