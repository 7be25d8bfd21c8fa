-- Resolve a batch of events in one round trip: match each event's contact
-- (by contactId when sent, else by email) and claim each externalId.
-- Arrays of equal length, one element per event, '' meaning absent:
-- $1 workspace, $2 email (normalised), $3 contactId, $4 externalId,
-- $5 event id (schemas.IDFromKey of the externalId; '' without one).
-- Within a batch every (workspace, externalId) appears at most once (the
-- caller folds repeats onto the first).
--
-- A claim that already exists is "updated" to itself: ON CONFLICT DO UPDATE
-- waits for a concurrent inserter, then locks and RETURNS the row as
-- committed, which DO NOTHING would not. xmax = 0 tells a fresh insert from
-- an existing claim. Claims are inserted in (workspace, externalId) order,
-- so concurrent batches lock in one order and cannot deadlock.
--
-- One row per input: ord (1-based), the matched contact id ('' when none),
-- and for claims the claim's event id, its contact id, whether this batch
-- inserted it, and whether it is younger than $6 seconds.
WITH input AS (
    SELECT t.ord, t.ws, t.email, t.contact_id, t.external_id, t.event_id
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
           WITH ORDINALITY AS t(ws, email, contact_id, external_id, event_id, ord)
),
matched AS (
    SELECT i.ord, i.ws, i.external_id, i.event_id,
           CASE WHEN i.contact_id <> '' THEN
                     (SELECT c.id FROM contacts c WHERE c.workspace_id = i.ws AND c.id = i.contact_id)
                WHEN i.email <> '' THEN
                     (SELECT c.id FROM contacts c WHERE c.workspace_id = i.ws AND c.email = i.email)
           END AS contact_id
      FROM input i
),
claimed AS (
    INSERT INTO event_claims AS c (workspace_id, external_id, event_id, contact_id)
    SELECT m.ws, m.external_id, m.event_id, m.contact_id
      FROM matched m
     WHERE m.external_id <> ''
     ORDER BY m.ws, m.external_id
    ON CONFLICT (workspace_id, external_id) DO UPDATE SET external_id = EXCLUDED.external_id
    RETURNING c.workspace_id, c.external_id, c.event_id, c.contact_id,
              (c.xmax = 0) AS inserted,
              (c.created_at > now() - make_interval(secs => $6)) AS fresh
)
SELECT m.ord,
       coalesce(m.contact_id, ''),
       coalesce(cl.event_id, ''),
       coalesce(cl.contact_id, ''),
       coalesce(cl.inserted, false),
       coalesce(cl.fresh, false)
  FROM matched m
  LEFT JOIN claimed cl ON cl.workspace_id = m.ws AND cl.external_id = m.external_id
