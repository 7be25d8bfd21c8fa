-- Execution $1 of workspace $2 with its journey's name and its contact's
-- email, for the journey webhook events.
SELECT e.journey_id, j.name, e.version, e.contact_id, c.email, e.state, e.finished_at
  FROM journey_executions e
  JOIN journeys j ON j.id = e.journey_id
  JOIN contacts c ON c.id = e.contact_id
 WHERE e.id = $1 AND e.workspace_id = $2
