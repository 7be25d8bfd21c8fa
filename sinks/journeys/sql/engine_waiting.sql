-- The active executions of contact $2 in workspace $1 waiting at a
-- wait_for_event step for event $3, with the step they wait at (served by
-- journey_executions_wait_event, which holds waiting executions only).
SELECT id, position
  FROM journey_executions
 WHERE contact_id = $2 AND wait_event = $3 AND workspace_id = $1 AND state = 'active'
 ORDER BY started_at, id
