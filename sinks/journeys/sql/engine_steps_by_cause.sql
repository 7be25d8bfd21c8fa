-- The steps of execution $1 envelope $2 ran, in the order it ran them, with what their
-- outputs need (the contact's email: '' when the contact is gone).
SELECT r.execution_id, r.address, r.step_type, r.outcome, coalesce(r.message_id, ''), coalesce(r.detail, ''),
       coalesce(r.final_state, ''), r.done_at, e.workspace_id, e.journey_id, e.version, e.contact_id,
       coalesce(c.email, '')
  FROM journey_step_runs r
  JOIN journey_executions e ON e.id = r.execution_id
  LEFT JOIN contacts c ON c.id = e.contact_id
 WHERE r.execution_id = $1 AND r.cause_id = $2
 ORDER BY r.seq
