-- The engine records two steps per execution it moves on (AdvanceAll), and
-- the foreign key checked each against journey_executions with a
-- SELECT ... FOR KEY SHARE: more than the insert itself (6-15 µs per row
-- against 4-10, EXPLAIN ANALYZE of 2,000 rows). Every step is recorded by
-- the engine under the execution's row lock, so the row exists; what the
-- key still did, deleting an execution's steps with it (a contact, journey
-- or version deleted), a statement trigger does, as for the hot tables of
-- 0040_hot_path_cascades.sql.
ALTER TABLE journey_step_runs DROP CONSTRAINT IF EXISTS journey_step_runs_execution_id_fkey;
CREATE OR REPLACE TRIGGER journey_executions_deleted
    AFTER DELETE ON journey_executions REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION delete_children('journey_step_runs', 'execution_id');
