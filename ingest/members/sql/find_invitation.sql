-- $1 token_hash, $2 now → the open invitation of that token
SELECT id, workspace_id, email, role, permissions FROM member_invitations
 WHERE token_hash = $1 AND accepted_at IS NULL AND expires_at > $2
