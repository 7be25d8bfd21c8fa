-- $1 workspace, $2 email: delete the email's invitations not accepted (a
-- new invitation replaces them; their links stop working).
DELETE FROM member_invitations WHERE workspace_id = $1 AND email = $2 AND accepted_at IS NULL
