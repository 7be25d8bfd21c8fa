-- The engine's view of execution $1, without a lock, as engine_peek.sql,
-- and whether envelope $2 ran steps before (a redelivery: the handler
-- returns their outputs again; journey_step_runs_cause serves it).
SELECT e.workspace_id, e.journey_id, e.version, e.contact_id, c.email, e.state, e.position, e.trigger_type,
       e.trigger_data, e.started_at, e.next_wake_at, j.status,
       EXISTS (SELECT 1 FROM journey_step_runs r WHERE r.cause_id = $2)
  FROM journey_executions e
  JOIN journeys j ON j.id = e.journey_id
  JOIN contacts c ON c.id = e.contact_id
 WHERE e.id = $1
