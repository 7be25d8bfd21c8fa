-- How many executions of journey $1 finished each step with each outcome
-- (admin journey stats: emails sent per step).
SELECT r.address, r.step_type, r.outcome, count(*)
  FROM journey_step_runs r JOIN journey_executions e ON e.id = r.execution_id
 WHERE e.journey_id = $1
 GROUP BY r.address, r.step_type, r.outcome
 ORDER BY r.address, r.outcome
