-- Store again, from their envelopes, messages whose rows are missing
-- (ingest claims commit asynchronously, so a Postgres crash may lose the
-- last ones; the envelope, acknowledged by the broker, is the durable
-- record). Equal-length arrays, one element per message; messages of
-- workspaces that are gone are skipped.
INSERT INTO transactional_messages
       (id, workspace_id, external_id, to_email, contact_id, rfc_message_id, policy_id, template_id, provider, created_at)
SELECT u.id, u.ws, nullif(u.external_id, ''), u.to_email, nullif(u.contact_id, ''), u.rfc_message_id,
       u.policy_id, nullif(u.template_id, ''), u.provider, u.accepted_at
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
              $9::text[], $10::timestamptz[])
       AS u(id, ws, external_id, to_email, contact_id, rfc_message_id, policy_id, template_id, provider, accepted_at)
 WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = u.ws)
ON CONFLICT DO NOTHING
