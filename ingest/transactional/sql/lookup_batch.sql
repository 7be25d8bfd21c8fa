-- Everything a batch of sends decides on, in one statement (group commit of
-- concurrent sends). Per send, equal-length arrays: $1 ordinal, $2
-- workspace, $3 recipient, $4 send policy key or id ('transactional' for
-- the default), $5 template id ('' for none), $6 the message id its
-- externalId maps to ('' for none); and every address of every send: $7 its
-- send's ordinal, $8 the address. One row per send; each column is NULL
-- when there is nothing to report.
--
-- The lookup pool runs this as a generic plan, made once per connection:
-- templates and messages are found by primary key alone (their workspace
-- checked on the row), since a plan made while a table was nearly empty
-- may otherwise pick any index that starts with workspace_id and then walk
-- the workspace's every row.
WITH input AS (
    SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
                  AS i(ord, ws, email, policy_ref, template_id, message_id)
),
addrs AS (
    SELECT * FROM unnest($7::int[], $8::text[]) AS a(ord, email)
)
SELECT i.ord,
    (SELECT json_build_object('id', c.id, 'status', c.status, 'firstName', c.first_name,
                              'country', c.country, 'language', c.language,
                              'customFields', c.custom_fields)
       FROM contacts c WHERE c.workspace_id = i.ws AND c.email = i.email),
    (SELECT json_agg(json_build_array(s.email, s.reason))
       FROM addrs a JOIN suppressions s ON s.workspace_id = i.ws AND s.email = a.email
      WHERE a.ord = i.ord),
    (SELECT json_build_object('id', p.id, 'key', p.key, 'kind', p.kind, 'fromEmail', p.from_email,
                              'fromName', p.from_name, 'provider', p.provider)
       FROM send_policies p
      WHERE p.workspace_id = i.ws AND (p.key = i.policy_ref OR p.id = i.policy_ref)
      ORDER BY (p.key = i.policy_ref) DESC LIMIT 1),
    (SELECT CASE WHEN t.workspace_id = i.ws THEN t.version END
       FROM templates t WHERE t.id = i.template_id),
    (SELECT array_agg(d.domain ORDER BY d.created_at, d.domain)
       FROM sending_domains d WHERE d.workspace_id = i.ws),
    (SELECT CASE WHEN m.workspace_id = i.ws THEN
                json_build_object('id', m.id, 'status', m.status, 'to', m.to_email,
                                  'messageId', m.rfc_message_id, 'contactId', m.contact_id,
                                  'warnings', m.warnings, 'requestHash', encode(m.request_hash, 'hex'),
                                  'createdAt', m.created_at) END
       FROM transactional_messages m WHERE m.id = i.message_id)
  FROM input i
