-- $1 id, $2 workspace id, $3 login id, $4 email, $5 role, $6 permissions
INSERT INTO members (id, workspace_id, login_id, email, role, permissions)
VALUES ($1, $2, $3, $4, $5, $6)
