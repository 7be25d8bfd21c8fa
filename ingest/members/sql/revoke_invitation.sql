-- $1 workspace, $2 invitation id: delete the invitation if it was not
-- accepted (its link stops working); returns its role.
DELETE FROM member_invitations WHERE workspace_id = $1 AND id = $2 AND accepted_at IS NULL
RETURNING role
