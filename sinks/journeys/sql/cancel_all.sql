-- Archive: end every active execution of journey $1 as cancelled at $2 and
-- release their re-entry guards. Returns the executions it ended (each is
-- announced by a cancellation in the same transaction).
WITH done AS (
    UPDATE journey_executions
       SET state = 'cancelled', finished_at = $2, next_wake_at = NULL, wait_event = NULL, updated_at = $2
     WHERE journey_id = $1 AND state = 'active'
    RETURNING id, workspace_id, contact_id, version, position
), per AS (
    SELECT contact_id, count(*) AS n FROM done GROUP BY contact_id
), released AS (
    UPDATE journey_entries e SET running = greatest(e.running - per.n, 0)
      FROM per
     WHERE e.journey_id = $1 AND e.contact_id = per.contact_id
    RETURNING 1
)
SELECT id, workspace_id, contact_id, version, position FROM done ORDER BY id
