-- Store a batch of new messages (status queued), one statement for
-- concurrent sends. Equal-length arrays, one element per message. With an
-- externalId the ids derive from it, so of several sends of one externalId
-- (in this batch, another batch or another server) exactly one row is
-- inserted; the others get no row back and read the winner.
INSERT INTO transactional_messages
       (id, workspace_id, external_id, request_hash, to_email, contact_id, rfc_message_id,
        policy_id, template_id, warnings, provider)
SELECT u.id, u.ws, nullif(u.external_id, ''), decode(u.request_hash, 'hex'), u.to_email,
       nullif(u.contact_id, ''), u.rfc_message_id, u.policy_id, nullif(u.template_id, ''),
       CASE WHEN u.warnings = '' THEN '{}'::text[] ELSE string_to_array(u.warnings, E'\n') END, u.provider
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
              $8::text[], $9::text[], $10::text[], $11::text[])
       AS u(id, ws, external_id, request_hash, to_email, contact_id, rfc_message_id,
            policy_id, template_id, warnings, provider)
ON CONFLICT DO NOTHING
RETURNING id, created_at
