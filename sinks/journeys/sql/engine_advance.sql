-- Steps of many executions in one statement (AdvanceAll): element i of
-- the arrays is one step of execution $1 at step $2; for each, lock the
-- execution if it is still active at that step of an active journey,
-- waiting ($3 true: for a wait that ended at or before $11) or not ($3
-- false: next_wake_at null); then record the step (type $4, outcome $5,
-- message $6, detail $7, final state $8, run by envelope $9, at $11; ''
-- for none) and move the execution to $10 or, when $8 is not '', finish
-- it in state $8 and release its re-entry guard (as finish.sql). When
-- $12 is not '', a second step at address $12 (type $13, outcome $14,
-- message $15, detail $16) ran after the first under the same lock and is
-- recorded with it; $10 and $8 are then where that one leaves the
-- execution, and only its record carries the final state.
-- Executions are locked in id order, so two statements never wait for
-- each other in a cycle; no two elements may name one execution. Returns,
-- per element in order, whether the execution was locked as expected and
-- whether the step was recorded: each row lock, record and move commit
-- together, as LockRun, RecordStep and Move/Finish do in one transaction.
WITH input AS (
    SELECT u.*
      FROM unnest($1::text[], $2::text[], $3::boolean[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                  $9::text[], $10::text[], $11::timestamptz[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[])
           WITH ORDINALITY AS u(id, address, wake_ended, step_type, outcome, message_id, detail, final, cause_id, next, done_at,
                                then_address, then_type, then_outcome, then_message, then_detail, ord)
), cur AS (
    SELECT e.id, i.next, i.final, i.done_at
      FROM journey_executions e
      JOIN input i ON i.id = e.id
      JOIN journeys j ON j.id = e.journey_id
     WHERE e.state = 'active' AND e.position = i.address AND j.status = 'active'
       AND CASE WHEN i.wake_ended THEN e.next_wake_at <= i.done_at ELSE e.next_wake_at IS NULL END
     ORDER BY e.id
       FOR UPDATE OF e
), rec AS (
    INSERT INTO journey_step_runs (execution_id, address, step_type, outcome, message_id, detail, final_state, cause_id, done_at)
    SELECT i.id, s.address, s.step_type, s.outcome, nullif(s.message_id, ''), nullif(s.detail, ''), nullif(s.final, ''),
           i.cause_id, i.done_at
      FROM cur JOIN input i ON i.id = cur.id
     CROSS JOIN LATERAL (VALUES
           (i.address, i.step_type, i.outcome, i.message_id, i.detail, CASE WHEN i.then_address = '' THEN i.final ELSE '' END, 1),
           (i.then_address, i.then_type, i.then_outcome, i.then_message, i.then_detail, i.final, 2)
         ) AS s(address, step_type, outcome, message_id, detail, final, n)
     WHERE s.address <> ''
     ORDER BY i.ord, s.n
    ON CONFLICT (execution_id, address) DO NOTHING
    RETURNING execution_id, address
), moved AS (
    -- Driven by cur (the locked rows, with their input), each probing its
    -- row by primary key; rec's ids are gathered once into an array. A
    -- join of rec with input here was planned, in the generic plan, as a
    -- nested loop over both CTEs (estimated at 1 and 10 rows): quadratic
    -- in the batch, 160 ms for 247 steps.
    UPDATE journey_executions x
       SET position = coalesce(nullif(c.next, ''), x.position), next_wake_at = NULL, wait_event = NULL, updated_at = c.done_at,
           state = coalesce(nullif(c.final, ''), x.state),
           finished_at = CASE WHEN c.final = '' THEN x.finished_at ELSE c.done_at END
      FROM cur c
     WHERE x.id = c.id AND x.state = 'active' AND c.id = ANY (ARRAY(SELECT execution_id FROM rec))
    RETURNING x.journey_id, x.contact_id, c.final
), entry AS (
    UPDATE journey_entries n SET running = n.running - f.ended
      FROM (SELECT journey_id, contact_id, count(*) AS ended FROM moved WHERE final <> '' GROUP BY journey_id, contact_id) f
     WHERE n.journey_id = f.journey_id AND n.contact_id = f.contact_id
)
SELECT cur.id IS NOT NULL, rec.execution_id IS NOT NULL
  FROM input i
  LEFT JOIN cur ON cur.id = i.id
  LEFT JOIN rec ON rec.execution_id = i.id AND rec.address = i.address
 ORDER BY i.ord
