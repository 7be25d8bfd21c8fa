-- Whether an envelope ran steps of an execution before (the engine's
-- replay of a redelivered envelope) is asked per execution: the primary
-- key (execution_id, address) finds an execution's few steps, and their
-- cause_id is compared there. The index on cause_id alone served only
-- that question and cost an entry per recorded step.
DROP INDEX IF EXISTS journey_step_runs_cause;
