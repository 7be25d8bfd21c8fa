-- Resolve a batch of events in one round trip: match each event's contact
-- (by contactId when sent, else by email) and claim each externalId.
-- Arrays of equal length, one element per event, '' meaning absent:
-- $1 workspace, $2 email (normalised), $3 contactId, $4 event id when the
-- event has an externalId (schemas.IDFromKey(workspace, "event",
-- externalId), 32 hex digits), else ''. Within a batch every event id
-- appears at most once (the caller folds repeats onto the first).
--
-- A claim that already exists is "updated" to itself: ON CONFLICT DO UPDATE
-- waits for a concurrent inserter, then locks and RETURNS the row as
-- committed, which DO NOTHING would not. xmax = 0 tells a fresh insert from
-- an existing claim. Claims are inserted in id order, so concurrent batches
-- lock in one order and cannot deadlock.
--
-- One row per input: ord (1-based), the matched contact id ('' when none),
-- and for claims whether the claim exists (claimed), its contact id,
-- whether this statement inserted it, and whether it is younger than $5
-- seconds.
WITH input AS (
    SELECT t.ord, t.ws, t.email, t.contact_id, nullif(t.event_id, '')::uuid AS event_id
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
           WITH ORDINALITY AS t(ws, email, contact_id, event_id, ord)
),
matched AS (
    SELECT i.ord, i.ws, i.event_id,
           CASE WHEN i.contact_id <> '' THEN
                     (SELECT c.id FROM contacts c WHERE c.workspace_id = i.ws AND c.id = i.contact_id)
                WHEN i.email <> '' THEN
                     (SELECT c.id FROM contacts c WHERE c.workspace_id = i.ws AND c.email = i.email)
           END AS contact_id
      FROM input i
),
claimed AS (
    INSERT INTO event_claims AS c (event_id, workspace_id, contact_id)
    SELECT m.event_id, m.ws, m.contact_id
      FROM matched m
     WHERE m.event_id IS NOT NULL
     ORDER BY m.event_id
    ON CONFLICT (event_id) DO UPDATE SET workspace_id = EXCLUDED.workspace_id
    RETURNING c.event_id, c.contact_id,
              (c.xmax = 0) AS inserted,
              (c.created_at > now() - make_interval(secs => $5)) AS fresh
)
SELECT m.ord,
       coalesce(m.contact_id, ''),
       cl.event_id IS NOT NULL,
       coalesce(cl.contact_id, ''),
       coalesce(cl.inserted, false),
       coalesce(cl.fresh, false)
  FROM matched m
  LEFT JOIN claimed cl ON cl.event_id = m.event_id
