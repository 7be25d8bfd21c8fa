-- The engine's view of many executions without a lock (PeekRuns): element
-- i of the arrays is execution $1 read for envelope $2. Per execution
-- found, as engine_peek.sql, with whether its envelope ran steps before (a
-- redelivery: the handler returns their outputs again) and the element's
-- ordinal; an execution that is gone (or whose journey or contact is) has
-- no row. The primary key's prefix, the execution's few steps, answers
-- the redelivery question: asked as a scalar subquery, which Postgres
-- never runs hashed (an EXISTS over journey_step_runs not yet analyzed was
-- planned as a hash of the whole table, built on every call).
SELECT e.workspace_id, e.journey_id, e.version, e.contact_id, c.email, e.state, e.position, e.trigger_type,
       e.trigger_data, e.started_at, e.next_wake_at, j.status,
       (SELECT true FROM journey_step_runs r WHERE r.execution_id = i.id AND r.cause_id = i.cause_id LIMIT 1) IS NOT NULL, i.ord
  FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS i(id, cause_id, ord)
  JOIN journey_executions e ON e.id = i.id
  JOIN journeys j ON j.id = e.journey_id
  JOIN contacts c ON c.id = e.contact_id
