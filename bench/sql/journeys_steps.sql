-- Phase (b) of the journeys benchmark: when each finished step of the
-- journey's executions ran (the engine's own record).
SELECT r.execution_id, r.address, r.done_at
FROM journey_step_runs r
JOIN journey_executions e ON e.id = r.execution_id
WHERE e.journey_id = $1
