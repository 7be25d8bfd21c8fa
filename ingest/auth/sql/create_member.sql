-- $1 id, $2 workspace id, $3 email (normalised), $4 password_hash, $5 role
INSERT INTO members (id, workspace_id, email, password_hash, role)
VALUES ($1, $2, $3, $4, $5)
