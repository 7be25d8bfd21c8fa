-- Write the cancellations of an archive into contact_outbox, in the
-- archive's transaction, for the contacts relay of scope $5 to publish
-- (the format of ingest/contacts' outbox_insert.sql: kind envelope, data
-- {topic, envelope}): one element per envelope: $1 its workspace, $2 its
-- contact id, $3 topic, $4 the envelope as JSON text.
INSERT INTO contact_outbox (workspace_id, contact_id, kind, data, scope)
SELECT u.ws, u.contact_id, 'envelope', jsonb_build_object('topic', u.topic, 'envelope', u.env), $5::text
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(ws, contact_id, topic, env)
