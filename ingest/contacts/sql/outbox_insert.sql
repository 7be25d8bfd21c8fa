-- Write the envelopes of one write into contact_outbox, in the write's
-- transaction (list memberships, sign-ups, confirmations): $1 workspace,
-- then one element per envelope: $2 contact id, $3 topic, $4 the envelope
-- as JSON text, which the relay publishes as it is (same id, same
-- causation id, same payload bytes). Returns the row ids in input order.
INSERT INTO contact_outbox (workspace_id, contact_id, kind, data)
SELECT $1, u.contact_id, 'envelope', jsonb_build_object('topic', u.topic, 'envelope', u.env)
  FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS u(contact_id, topic, env, ord)
 ORDER BY u.ord
RETURNING id
