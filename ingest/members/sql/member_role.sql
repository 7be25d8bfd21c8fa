-- $1 workspace, $2 member: the member's role, locked for its removal.
SELECT role FROM members WHERE workspace_id = $1 AND id = $2 FOR UPDATE
