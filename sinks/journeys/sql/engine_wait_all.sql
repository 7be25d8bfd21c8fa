-- Begin the waits of many executions in one statement (WaitAll): element
-- i of the arrays is one execution $1 at step $2, waiting until $3 for
-- event $4 ('' for none); $5 is the time of the change. Each execution is
-- locked (in id order, so two statements never wait for each other in a
-- cycle) and moved only if it is still active at that step, waiting for
-- nothing, and its journey is active: what LockRun's checks and Wait do
-- for one. Returns the ids of the executions it moved.
WITH input AS (
    SELECT u.*
      FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[]) AS u(id, position, wake_at, wait_event)
), cur AS (
    SELECT e.id, i.wake_at, i.wait_event
      FROM journey_executions e
      JOIN input i ON i.id = e.id
      JOIN journeys j ON j.id = e.journey_id
     WHERE e.state = 'active' AND e.position = i.position AND e.next_wake_at IS NULL AND j.status = 'active'
     ORDER BY e.id
       FOR UPDATE OF e
)
UPDATE journey_executions x
   SET next_wake_at = cur.wake_at, wait_event = nullif(cur.wait_event, ''), updated_at = $5
  FROM cur
 WHERE x.id = cur.id
RETURNING x.id
