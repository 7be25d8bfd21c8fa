-- No index holds an execution's state, so the update that ends an
-- execution (the engine's last step: state, finished_at, position) is a
-- HOT update that writes no index entry, like every other move (fill
-- factor 70, migration 0064). Before, each ended execution wrote a new
-- entry in every index but the partial one on wait_event.
--
-- A contact's executions are few: the contact index finds them and the
-- state is checked on the row (exitOn conversions, the engine's waits).
-- A journey's executions by state (the admin listing, archiving's
-- cancellation) are read in the journey index's order with the state as a
-- filter, as the journey's stats already read every execution.
CREATE INDEX IF NOT EXISTS journey_executions_by_contact ON journey_executions (contact_id);
DROP INDEX IF EXISTS journey_executions_contact;
DROP INDEX IF EXISTS journey_executions_journey_state;
