-- One step of execution $1 in one statement (its own transaction): lock
-- the execution if it is still active at step $2 of an active journey,
-- waiting ($3 true: for a wait that ended at or before $11) or not ($3
-- false: next_wake_at null); then record the step (type $4, outcome $5,
-- message $6, detail $7, final state $8, run by envelope $9, at $11) and
-- move the execution to $10 or, when $8 is not null, finish it in state $8
-- and release its re-entry guard (as finish.sql). Returns whether the
-- execution was locked as expected and whether the step was recorded: a
-- row lock, the record and the move commit together, as LockRun,
-- RecordStep and Move/Finish do in one transaction.
WITH cur AS (
    SELECT e.id
      FROM journey_executions e
      JOIN journeys j ON j.id = e.journey_id
     WHERE e.id = $1 AND e.state = 'active' AND e.position = $2 AND j.status = 'active'
       AND CASE WHEN $3::boolean THEN e.next_wake_at <= $11 ELSE e.next_wake_at IS NULL END
       FOR UPDATE OF e
), rec AS (
    INSERT INTO journey_step_runs (execution_id, address, step_type, outcome, message_id, detail, final_state, cause_id, done_at)
    SELECT cur.id, $2, $4, $5, $6, $7, $8, $9, $11 FROM cur
    ON CONFLICT (execution_id, address) DO NOTHING
    RETURNING execution_id
), moved AS (
    UPDATE journey_executions x
       SET position = coalesce($10, x.position), next_wake_at = NULL, wait_event = NULL, updated_at = $11,
           state = coalesce($8, x.state),
           finished_at = CASE WHEN $8::text IS NULL THEN x.finished_at ELSE $11 END
      FROM rec
     WHERE x.id = rec.execution_id AND x.state = 'active'
    RETURNING x.journey_id, x.contact_id
), entry AS (
    UPDATE journey_entries n SET running = n.running - 1
      FROM moved
     WHERE $8::text IS NOT NULL AND n.journey_id = moved.journey_id AND n.contact_id = moved.contact_id
)
SELECT (SELECT count(*) FROM cur) > 0, (SELECT count(*) FROM rec) > 0
