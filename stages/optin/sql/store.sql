-- Store the confirmation email $1 of workspace $2 as a queued transactional
-- message (no template, no externalId), as a send stores its message before
-- publishing it. A replayed envelope derives the same id: nothing changes.
INSERT INTO transactional_messages
       (id, workspace_id, to_email, contact_id, rfc_message_id, policy_id, provider, created_at)
VALUES ($1, $2, $3, nullif($4, ''), $5, $6, $7, $8)
ON CONFLICT DO NOTHING
