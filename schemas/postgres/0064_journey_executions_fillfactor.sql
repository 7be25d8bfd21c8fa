-- Journey executions are inserted once and then updated a few times in
-- place (entering a wait, waking, moving on): position, next_wake_at and
-- updated_at are in no index, so with free room on the row's page the
-- update is a heap-only tuple (HOT) and writes no index entry. At the
-- default fill factor of 100 new rows fill their pages, every such update
-- moved the row to another page and inserted into all six indexes of the
-- table. journey_entries' running count changes the same way. Applies to
-- pages written from now on.
ALTER TABLE journey_executions SET (fillfactor = 70);
ALTER TABLE journey_entries SET (fillfactor = 80);
