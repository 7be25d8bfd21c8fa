-- Everything a send decides on, in one round trip. $1 workspace, $2 the
-- recipient, $3 every address of the send (to, cc, bcc), $4 the send policy
-- key or id ('transactional' for the default), $5 the template id ('' for
-- none), $6 the externalId ('' for none). Each column is NULL when there is
-- nothing to report.
SELECT
    (SELECT json_build_object('id', c.id, 'status', c.status, 'firstName', c.first_name,
                              'country', c.country, 'language', c.language,
                              'customFields', c.custom_fields)
       FROM contacts c WHERE c.workspace_id = $1 AND c.email = $2),
    (SELECT json_agg(json_build_array(s.email, s.reason))
       FROM suppressions s WHERE s.workspace_id = $1 AND s.email = ANY ($3::text[])),
    (SELECT json_build_object('id', p.id, 'key', p.key, 'kind', p.kind, 'fromEmail', p.from_email,
                              'fromName', p.from_name, 'provider', p.provider)
       FROM send_policies p
      WHERE p.workspace_id = $1 AND (p.key = $4 OR p.id = $4)
      ORDER BY (p.key = $4) DESC LIMIT 1),
    (SELECT t.version FROM templates t WHERE t.workspace_id = $1 AND t.id = $5),
    (SELECT array_agg(d.domain ORDER BY d.created_at, d.domain)
       FROM sending_domains d WHERE d.workspace_id = $1),
    (SELECT json_build_object('id', m.id, 'status', m.status, 'to', m.to_email,
                              'messageId', m.rfc_message_id, 'contactId', m.contact_id,
                              'warnings', m.warnings, 'requestHash', encode(m.request_hash, 'hex'),
                              'createdAt', m.created_at)
       FROM transactional_messages m WHERE m.workspace_id = $1 AND m.external_id = $6)
