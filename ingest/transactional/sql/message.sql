-- One message of workspace $1 by id ($2; for an externalId, the id derived
-- from it).
SELECT id, status, to_email, rfc_message_id, coalesce(external_id, ''), coalesce(contact_id, ''),
       coalesce(template_id, ''), policy_id, provider, coalesce(failure_reason, ''),
       coalesce(bounce_type, ''), coalesce(bounce_reason, ''), coalesce(complaint_type, ''),
       created_at, sent_at, delivered_at, bounced_at, complained_at, failed_at, subject
  FROM transactional_messages
 WHERE id = $2 AND workspace_id = $1
