-- $1 id, $2 workspace id, $3 email, $4 role, $5 permissions, $6 token_hash,
-- $7 invited_by (member id), $8 expires_at
INSERT INTO member_invitations (id, workspace_id, email, role, permissions, token_hash, invited_by, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
