-- Phase (b) of the journeys benchmark: the timers (River jobs) due in
-- [$1, $2]: their due time, when a worker took each and when its publish
-- finished, in seconds after the due time.
SELECT extract(epoch FROM attempted_at - scheduled_at)::float8,
       extract(epoch FROM finalized_at - scheduled_at)::float8
FROM river_job
WHERE kind = 'timer_publish' AND scheduled_at BETWEEN $1 AND $2
  AND attempted_at IS NOT NULL AND finalized_at IS NOT NULL
