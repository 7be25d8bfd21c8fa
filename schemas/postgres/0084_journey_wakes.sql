-- The wake relay's timers move out of journey_executions into a table of
-- their own. Claiming a due wake-up used to clear
-- journey_executions.wake_scope: an update of a wide row that changed an
-- indexed column, so it wrote a new row version and an entry in each of
-- the table's seven indexes, before the engine's move updated the row
-- again. Now the relay deletes a narrow row here (no index entry is
-- written for a delete) and the execution row is updated once, by the
-- move.
--
-- A row is the wake-up of execution_id, due at due_at for its wait at
-- position, fired by the wake relay of scope (the deployment's timer
-- queue, sinks/timers QueueFor). An execution that moves on some other
-- way (its event arrived, it was archived or deleted) leaves its row: the
-- relay deletes it when due and publishes nothing, since the execution is
-- no longer waiting there for that time.
CREATE TABLE journey_wakes (
    execution_id text PRIMARY KEY,
    scope        text NOT NULL,
    due_at       timestamptz NOT NULL,
    position     text NOT NULL
);

-- The relay's due wake-ups, earliest first, per scope.
CREATE INDEX journey_wakes_due ON journey_wakes (scope, due_at);

INSERT INTO journey_wakes (execution_id, scope, due_at, position)
SELECT id, wake_scope, next_wake_at, position
  FROM journey_executions
 WHERE wake_scope IS NOT NULL AND next_wake_at IS NOT NULL AND state = 'active';

DROP INDEX journey_executions_wake_due;
ALTER TABLE journey_executions DROP COLUMN wake_scope;

-- journey_executions_contact (contact_id, state), migration 0063, serves
-- every query this partial index of active executions served, and each
-- index is one more entry per row version.
DROP INDEX IF EXISTS journey_executions_contact_active;
