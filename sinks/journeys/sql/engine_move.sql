-- Move active execution $1 to position $2, waiting until $3 (null: not
-- waiting), at $4.
UPDATE journey_executions SET position = $2, next_wake_at = $3, updated_at = $4
 WHERE id = $1 AND state = 'active'
