-- The executions of contact $2 in workspace $1 that an event named $3, or
-- a goal of type $4 ('' for a plain event), converts by the exitOn of the
-- version each runs: the active ones, locked for Finish, and those already
-- converted at or after $5 (a redelivered event announces them again).
-- The journey_executions_by_contact index (migration 0086) serves both arms.
SELECT e.id, e.journey_id, j.name, e.version, e.contact_id, c.email, e.state,
       e.conversion_value::float8, e.finished_at
  FROM journey_executions e
  JOIN journey_versions v ON v.journey_id = e.journey_id AND v.version = e.version
  JOIN journeys j ON j.id = e.journey_id
  JOIN contacts c ON c.id = e.contact_id
 WHERE e.contact_id = $2 AND e.workspace_id = $1
   AND (e.state = 'active' OR (e.state = 'converted' AND e.finished_at >= $5))
   AND (v.definition->'exitOn'->>'event' = $3 OR ($4 <> '' AND v.definition->'exitOn'->>'goalType' = $4))
 ORDER BY e.started_at, e.id
   FOR UPDATE OF e
