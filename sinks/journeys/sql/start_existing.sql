-- An execution started before under id $1 (a retried start).
SELECT e.id, e.journey_id, e.version, e.contact_id, c.email, e.state, e.position, e.trigger_type,
       coalesce(e.source_id, ''), e.trigger_data, e.started_at
  FROM journey_executions e JOIN contacts c ON c.id = e.contact_id
 WHERE e.id = $1
