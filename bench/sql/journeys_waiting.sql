-- Phase (b) of the journeys benchmark: how many of the journey's
-- executions exist and wait on a timer, and their earliest and latest due
-- times.
SELECT count(*),
       count(*) FILTER (WHERE next_wake_at IS NOT NULL),
       coalesce(min(next_wake_at), now()),
       coalesce(max(next_wake_at), now())
FROM journey_executions
WHERE journey_id = $1
