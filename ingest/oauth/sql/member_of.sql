-- $1 member, $2 workspace: the member's role and named permissions.
SELECT m.role, m.permissions FROM members m WHERE m.id = $1 AND m.workspace_id = $2
