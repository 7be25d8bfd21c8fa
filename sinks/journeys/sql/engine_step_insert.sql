-- Record that execution $1 finished step $2 ($3 its type) with outcome $4,
-- message $5, detail $6, final state $7, run by envelope $8 at $9. Nothing
-- when it was recorded before.
INSERT INTO journey_step_runs (execution_id, address, step_type, outcome, message_id, detail, final_state, cause_id, done_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (execution_id, address) DO NOTHING
