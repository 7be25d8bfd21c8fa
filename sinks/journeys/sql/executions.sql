-- The executions of journey $1 in workspace $2, newest first, in state $3
-- ('' for every state), at most $4.
SELECT e.id, e.contact_id, c.email, e.version, e.state, e.position, e.started_at, e.next_wake_at, e.finished_at
  FROM journey_executions e JOIN contacts c ON c.id = e.contact_id
 WHERE e.journey_id = $1 AND e.workspace_id = $2 AND ($3::text = '' OR e.state = $3)
 ORDER BY e.started_at DESC, e.id DESC
 LIMIT $4
