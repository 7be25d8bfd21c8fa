-- $1 workspace → its members, oldest first.
SELECT id, email, role, permissions, created_at FROM members
 WHERE workspace_id = $1
 ORDER BY created_at, id
