-- Move active execution $1 to position $2, waiting until $3 (null: not
-- waiting) for event $5 (null: for no event; a wait_for_event step sets
-- it, journey_executions_wait_event finds it), at $4.
UPDATE journey_executions SET position = $2, next_wake_at = $3, wait_event = $5, updated_at = $4
 WHERE id = $1 AND state = 'active'
