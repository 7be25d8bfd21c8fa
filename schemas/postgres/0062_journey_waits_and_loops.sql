-- The journey engine's wait_for_event and causal loops (issue 26).
--
-- wait_event is the event name an execution waits for at a wait_for_event
-- step (null otherwise): the engine sets it with next_wake_at when the
-- execution enters the step and clears it when it leaves. The matching
-- stage looks up, for each recorded event of a contact, the executions of
-- that contact waiting for its name (journey_executions_wait_event, a
-- partial index holding only waiting executions).
--
-- ancestry lists the journeys whose executions' steps caused this
-- execution's start (an add_to_list step whose list join started it, and
-- that execution's ancestry before it); null for a start nothing of a
-- journey caused. A start whose journey is in the causing execution's
-- ancestry or is the causing execution's own journey is refused: a journey
-- never restarts itself for a contact through its own steps, directly or
-- through other journeys.
ALTER TABLE journey_executions ADD COLUMN IF NOT EXISTS wait_event text;
ALTER TABLE journey_executions ADD COLUMN IF NOT EXISTS ancestry text[];
CREATE INDEX IF NOT EXISTS journey_executions_wait_event
    ON journey_executions (contact_id, wait_event) WHERE wait_event IS NOT NULL;
