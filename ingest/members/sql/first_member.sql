-- $1 login id → the login's oldest membership, the workspace a new session
-- acts in
SELECT id FROM members WHERE login_id = $1 ORDER BY created_at, id LIMIT 1
