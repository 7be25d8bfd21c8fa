-- Archive: end every active execution of journey $1 as cancelled at $2 and
-- release their re-entry guards. Returns how many ended.
WITH done AS (
    UPDATE journey_executions
       SET state = 'cancelled', finished_at = $2, next_wake_at = NULL, updated_at = $2
     WHERE journey_id = $1 AND state = 'active'
    RETURNING contact_id
), per AS (
    SELECT contact_id, count(*) AS n FROM done GROUP BY contact_id
), released AS (
    UPDATE journey_entries e SET running = greatest(e.running - per.n, 0)
      FROM per
     WHERE e.journey_id = $1 AND e.contact_id = per.contact_id
    RETURNING 1
)
SELECT (SELECT count(*) FROM done)
