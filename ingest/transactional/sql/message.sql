-- One message of workspace $1 by id ($2) or externalId ($3).
SELECT id, status, to_email, rfc_message_id, coalesce(external_id, ''), coalesce(contact_id, ''),
       coalesce(template_id, ''), policy_id, provider, coalesce(failure_reason, ''),
       coalesce(bounce_type, ''), coalesce(bounce_reason, ''), coalesce(complaint_type, ''),
       created_at, sent_at, delivered_at, bounced_at, complained_at, failed_at
  FROM transactional_messages
 WHERE workspace_id = $1 AND (($2 <> '' AND id = $2) OR ($3 <> '' AND external_id = $3))
