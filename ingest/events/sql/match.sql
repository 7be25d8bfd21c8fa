-- Match a batch of events without an externalId to their contacts: the
-- read-only half of resolve.sql (no claims, so no write and no commit), with
-- the same output columns. Arrays of equal length, '' meaning absent:
-- $1 workspace, $2 email (normalised), $3 contactId.
SELECT t.ord,
       coalesce(CASE WHEN t.contact_id <> '' THEN
                          (SELECT c.id FROM contacts c WHERE c.workspace_id = t.ws AND c.id = t.contact_id)
                     WHEN t.email <> '' THEN
                          (SELECT c.id FROM contacts c WHERE c.workspace_id = t.ws AND c.email = t.email)
                END, ''),
       false, '', false, false
  FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(ws, email, contact_id, ord)
