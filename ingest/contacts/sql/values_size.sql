-- What a stored contact's values take in its events, per value, as an upper
-- bound: the text Postgres gives back, each <, > and & counted as the six
-- bytes of its \u escape and U+2028 and U+2029 as six (encoding/json writes
-- them so). Rows: firstName, country, language, source, metadata,
-- customFields (the whole object), then customFields.<key> for each key of
-- $3 the contact has. No rows when ($1 workspace, $2 email) is no contact.
-- Read by size.go before a large upsert (contacts.go checkGrowth).
WITH c AS (
    SELECT first_name, country, language, source, metadata, custom_fields
      FROM contacts
     WHERE workspace_id = $1 AND email = $2
), v (k, t) AS (
    SELECT f.k, f.t
      FROM c, LATERAL (VALUES ('firstName', to_jsonb(c.first_name)::text), ('country', to_jsonb(c.country)::text),
                              ('language', to_jsonb(c.language)::text), ('source', to_jsonb(c.source)::text),
                              ('metadata', c.metadata::text), ('customFields', c.custom_fields::text)) AS f (k, t)
    UNION ALL
    SELECT 'customFields.' || key, (c.custom_fields -> key)::text
      FROM c, unnest($3::text[]) AS key
     WHERE c.custom_fields ? key
)
SELECT k,
       coalesce(octet_length(t)
                + 5 * (octet_length(t) - octet_length(translate(t, '<>&', '')))
                + (octet_length(t) - octet_length(translate(t, U&'\2028\2029', ''))), 4)::bigint
  FROM v
