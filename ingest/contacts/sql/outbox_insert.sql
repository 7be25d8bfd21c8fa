-- Write whole envelopes into contact_outbox, in the transaction of the write
-- they announce (list memberships, sign-ups, confirmations, provider
-- reports of ingest/transactional): one element per envelope: $1 its
-- workspace, $2 the id of its key (a contact id, or a message id for a
-- report), $3 topic, $4 the envelope as JSON text, which the relay
-- publishes as it is (same id, same causation id, same payload bytes).
-- $5 is the outbox scope (the topic prefix whose relay publishes the rows).
-- Returns the row ids in input order.
INSERT INTO contact_outbox (workspace_id, contact_id, kind, data, scope)
SELECT u.ws, u.contact_id, 'envelope', jsonb_build_object('topic', u.topic, 'envelope', u.env), $5::text
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS u(ws, contact_id, topic, env, ord)
 ORDER BY u.ord
RETURNING id
