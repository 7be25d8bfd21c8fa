-- Finish active execution $1 of workspace $2 in state $3 at $4 with
-- conversion value $5 (converted only), and release its re-entry guard.
-- Returns nothing when the execution was not active.
WITH done AS (
    UPDATE journey_executions
       SET state = $3, finished_at = $4, next_wake_at = NULL, wait_event = NULL, conversion_value = $5, updated_at = $4
     WHERE id = $1 AND workspace_id = $2 AND state = 'active'
    RETURNING journey_id, contact_id
)
UPDATE journey_entries e SET running = e.running - 1
  FROM done
 WHERE e.journey_id = done.journey_id AND e.contact_id = done.contact_id
RETURNING e.journey_id
