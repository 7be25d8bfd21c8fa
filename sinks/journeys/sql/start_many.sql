-- Start many executions in one statement (StartMany): element i of the
-- arrays is one start: $1 workspace, $2 journey, $3 trigger type, $4
-- contact id ('' to find the contact by $5 email), $6 new execution id,
-- $7 source id ('' for none), $8 trigger data (JSON text or null); $9 the
-- start time; $10 the version whose first step the element's wait is (0
-- for none), $11 when that wait ends and $12 the event it waits for (''
-- for none): an execution started on that version is inserted waiting at
-- its first step, one started on another version (changed meanwhile) is
-- not; $13 is the scope whose wake relay fires that wait (a journey_wakes
-- row).
-- No two elements may name one journey and contact.
-- For each element in order: its refusal ('' when started) with the
-- contact and version it started with, and whether it started waiting. The checks of start_journey.sql
-- (the journey share-locked against status changes), start_contact.sql
-- and start_enter.sql (the re-entry guard's row lock makes racing starts
-- for one contact wait and then see the winner's row), in one round trip;
-- guard rows are written in journey, contact order so that concurrent
-- statements lock them in one order.
WITH input AS (
    SELECT u.*
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                  $10::int[], $11::timestamptz[], $12::text[], $13::text[])
           WITH ORDINALITY AS u(ws, journey_id, trigger_type, contact_id, email, exec_id, source_id, data,
                                wait_version, wake_at, wait_event, wake_scope, ord)
), j AS (
    SELECT j.id, j.workspace_id, j.status, j.trigger_type, j.reentry, j.current_version
      FROM journeys j
     WHERE (j.workspace_id, j.id) IN (SELECT DISTINCT ws, journey_id FROM input)
       FOR SHARE
), checked AS (
    SELECT i.ord, i.journey_id, i.trigger_type, i.exec_id, i.ws, i.source_id, i.data,
           coalesce(i.wait_version > 0 AND i.wait_version = j.current_version, false) AS waits, i.wake_at, i.wait_event,
           i.wake_scope,
           j.reentry, coalesce(j.current_version, 0) AS version, c.id AS cid, c.email AS cemail,
           CASE WHEN j.id IS NULL THEN 'journey_not_found'
                WHEN j.status <> 'active' THEN 'journey_not_active'
                WHEN j.trigger_type <> i.trigger_type THEN 'wrong_trigger'
                WHEN c.id IS NULL THEN 'contact_not_found'
                WHEN c.status <> 'ACTIVE' THEN 'contact_not_active'
                ELSE '' END AS refusal
      FROM input i
      LEFT JOIN j ON j.workspace_id = i.ws AND j.id = i.journey_id
      LEFT JOIN LATERAL (
            SELECT c.id, c.email, c.status
              FROM contacts c
             WHERE c.workspace_id = i.ws
               AND ((i.contact_id <> '' AND c.id = i.contact_id) OR (i.contact_id = '' AND c.email = i.email))
             LIMIT 1) c ON true
), entered AS (
    INSERT INTO journey_entries AS e (journey_id, contact_id, entries, running, first_entered_at, last_entered_at)
    SELECT k.journey_id, k.cid, 1, 1, $9, $9
      FROM checked k
     WHERE k.refusal = ''
     ORDER BY k.journey_id, k.cid
    ON CONFLICT (journey_id, contact_id) DO UPDATE
       SET entries = e.entries + 1, running = e.running + 1, last_entered_at = EXCLUDED.last_entered_at
     WHERE (SELECT r.reentry FROM journeys r WHERE r.id = e.journey_id) = 'always'
        OR ((SELECT r.reentry FROM journeys r WHERE r.id = e.journey_id) = 'once_at_a_time' AND e.running = 0)
    RETURNING e.journey_id, e.contact_id
), inserted AS (
    INSERT INTO journey_executions (id, workspace_id, journey_id, version, contact_id, state, position,
                                    trigger_type, source_id, trigger_data, started_at, updated_at, ancestry,
                                    next_wake_at, wait_event)
    SELECT k.exec_id, k.ws, k.journey_id, k.version, k.cid, 'active', '0', k.trigger_type,
           nullif(k.source_id, ''), k.data::jsonb, $9, $9, NULL,
           CASE WHEN k.waits THEN k.wake_at END, CASE WHEN k.waits THEN nullif(k.wait_event, '') END
      FROM checked k
      JOIN entered n ON n.journey_id = k.journey_id AND n.contact_id = k.cid
    RETURNING id
), woke AS (
    INSERT INTO journey_wakes (execution_id, scope, due_at, position)
    SELECT k.exec_id, k.wake_scope, k.wake_at, '0'
      FROM checked k
      JOIN inserted x ON x.id = k.exec_id
     WHERE k.waits
)
SELECT CASE WHEN k.refusal <> '' THEN k.refusal WHEN n.contact_id IS NULL THEN 'reentry' ELSE '' END,
       coalesce(k.cid, ''), coalesce(k.cemail, ''), k.version, (k.waits AND n.contact_id IS NOT NULL)
  FROM checked k
  LEFT JOIN entered n ON n.journey_id = k.journey_id AND n.contact_id = k.cid
 ORDER BY k.ord
