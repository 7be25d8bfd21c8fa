-- The message of an externalId ($2) in workspace $1.
SELECT id, status, to_email, rfc_message_id, coalesce(contact_id, ''), warnings,
       coalesce(encode(request_hash, 'hex'), ''), created_at,
       EXISTS (SELECT 1 FROM transactional_payloads p WHERE p.message_id = m.id)
  FROM transactional_messages m
 WHERE workspace_id = $1 AND external_id = $2
