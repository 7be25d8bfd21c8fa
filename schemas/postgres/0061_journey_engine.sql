-- The journey execution engine (issue 26 item 4; stages/journeys,
-- sinks/journeys engine.go): one row per step an execution finished. A
-- step runs at most once per execution (journey versions have no loops),
-- so the primary key is the guard that a step's side effect happens once:
-- the engine inserts the row in the transaction that moves the execution
-- past the step. cause_id is the envelope whose handling ran the step: a
-- redelivered envelope finds the steps it ran and returns their outputs
-- again (the runner may have died before publishing them).
CREATE TABLE IF NOT EXISTS journey_step_runs (
    execution_id text NOT NULL REFERENCES journey_executions (id) ON DELETE CASCADE,
    address      text NOT NULL,
    step_type    text NOT NULL,
    outcome      text NOT NULL,
    message_id   text,
    detail       text,
    final_state  text,
    cause_id     text NOT NULL,
    done_at      timestamptz NOT NULL,
    seq          bigserial,
    PRIMARY KEY (execution_id, address)
);
CREATE INDEX IF NOT EXISTS journey_step_runs_cause ON journey_step_runs (cause_id);
