-- $1 workspace, $2 now → its open invitations (not accepted, not expired),
-- newest first.
SELECT id, email, role, permissions, created_at, expires_at FROM member_invitations
 WHERE workspace_id = $1 AND accepted_at IS NULL AND expires_at > $2
 ORDER BY created_at DESC, id
