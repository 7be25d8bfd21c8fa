-- The journeys benchmark: how many of the journey's executions ended
-- completed, and how many are still active but not waiting on a timer
-- (started, not yet handled by the engine).
SELECT count(*) FILTER (WHERE state = 'completed'),
       count(*) FILTER (WHERE state = 'active' AND next_wake_at IS NULL)
FROM journey_executions
WHERE journey_id = $1
