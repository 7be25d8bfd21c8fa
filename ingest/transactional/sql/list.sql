-- A page of workspace $1's messages, newest first: optional filters to ($2),
-- status ($3), externalId (as the id derived from it, $4); before the message with id $5; at most $6.
-- Store.List swaps the status line for `problem = $3` when $3 is bounced,
-- complained or failed, whose messages have an index of their own.
SELECT id, status, to_email, rfc_message_id, coalesce(external_id, ''), coalesce(contact_id, ''),
       coalesce(template_id, ''), policy_id, provider, coalesce(failure_reason, ''),
       coalesce(bounce_type, ''), coalesce(bounce_reason, ''), coalesce(complaint_type, ''),
       created_at, sent_at, delivered_at, bounced_at, complained_at, failed_at, subject
  FROM transactional_messages
 WHERE workspace_id = $1
   AND ($2 = '' OR to_email = $2)
   AND ($3 = '' OR status = $3)
   AND ($4 = '' OR id = $4)
   AND ($5 = '' OR seq < (SELECT b.seq FROM transactional_messages b WHERE b.workspace_id = $1 AND b.id = $5))
 ORDER BY seq DESC
 LIMIT $6
