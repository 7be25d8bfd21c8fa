-- The message of an externalId in workspace $1, by its id ($2, derived from
-- the externalId: schemas.IDFromKey(workspace, "transactional", externalId)).
SELECT id, status, to_email, rfc_message_id, coalesce(contact_id, ''), warnings,
       coalesce(encode(request_hash, 'hex'), ''), created_at,
       EXISTS (SELECT 1 FROM transactional_payloads p WHERE p.message_id = m.id)
  FROM transactional_messages m
 WHERE id = $2 AND workspace_id = $1
