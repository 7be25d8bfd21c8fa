-- An execution started waiting at its first step (the trigger endpoint's
-- StartMany) is its own timer: wake_scope names the deployment (its topic
-- prefix's timer queue, sinks/timers QueueFor) whose wake relay
-- (sinks/journeys RelayWakes) publishes its wake-up once next_wake_at is
-- due, and clears wake_scope in the transaction that publishes it. NULL:
-- no relay fires this execution (a River timer does, or nothing waits).
ALTER TABLE journey_executions ADD COLUMN wake_scope text;

-- The relay's due executions, earliest first, per scope.
CREATE INDEX journey_executions_wake_due ON journey_executions (wake_scope, next_wake_at)
    WHERE wake_scope IS NOT NULL AND next_wake_at IS NOT NULL AND state = 'active';
