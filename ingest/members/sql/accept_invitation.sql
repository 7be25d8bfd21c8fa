-- $1 invitation id, $2 now
UPDATE member_invitations SET accepted_at = $2 WHERE id = $1 AND accepted_at IS NULL
