-- The send_email steps the executions of journey $1 finished, per version
-- and step address: how many were accepted for delivery (outcome sent)
-- and how many refused (suppressed). From the engine's step records,
-- written in the transaction that moves an execution past the step.
SELECT e.version, r.address,
       count(*) FILTER (WHERE r.outcome = 'sent'),
       count(*) FILTER (WHERE r.outcome = 'suppressed')
  FROM journey_executions e
  JOIN journey_step_runs r ON r.execution_id = e.id
 WHERE e.journey_id = $1 AND r.step_type = 'send_email'
 GROUP BY e.version, r.address
