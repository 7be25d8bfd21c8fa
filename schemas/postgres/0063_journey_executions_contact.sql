-- Every execution of a contact, whatever its state: the exitOn conversion
-- query (sinks/journeys/sql/convert.sql) asks for a contact's active
-- executions and the ones converted since a time, an OR that the
-- active-only partial index cannot serve alone, so it read the whole table
-- on every recorded event of a workspace with journeys. A contact has few
-- executions, so one index on contact_id serves both arms.
CREATE INDEX IF NOT EXISTS journey_executions_contact ON journey_executions (contact_id, state);
