-- $1 workspace id
SELECT EXISTS (SELECT 1 FROM workspaces WHERE id = $1)
