-- Store the invitation email $1 of workspace $2 as a queued transactional
-- message (no template, no contact), as a send stores its message before
-- publishing it, in the invitation's transaction: the message log lists
-- it, the delivery stage sends it once.
INSERT INTO transactional_messages
       (id, workspace_id, to_email, rfc_message_id, policy_id, provider, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
