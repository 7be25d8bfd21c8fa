-- Counts of the executions of journey $1 that exist now, by state, and
-- the revenue of its conversions.
SELECT count(*),
       count(*) FILTER (WHERE state = 'active'),
       count(*) FILTER (WHERE state = 'completed'),
       count(*) FILTER (WHERE state = 'exited'),
       count(*) FILTER (WHERE state = 'converted'),
       count(*) FILTER (WHERE state = 'cancelled'),
       count(*) FILTER (WHERE state = 'failed'),
       coalesce(sum(conversion_value) FILTER (WHERE state = 'converted'), 0)::float8
  FROM journey_executions
 WHERE journey_id = $1
