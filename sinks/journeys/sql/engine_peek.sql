-- The engine's view of execution $1, without a lock (read before the step:
-- the execution, its journey's status, the contact's email).
SELECT e.workspace_id, e.journey_id, e.version, e.contact_id, c.email, e.state, e.position, e.trigger_type,
       e.trigger_data, e.started_at, e.next_wake_at, j.status
  FROM journey_executions e
  JOIN journeys j ON j.id = e.journey_id
  JOIN contacts c ON c.id = e.contact_id
 WHERE e.id = $1

