-- journey_events: journey analytics (issue 26 item 5), written in batches
-- by the journeylog stages: one row per step an execution finished
-- (event 'step', from the engine's journey_step.done.v1 on the journey
-- steps topic), per execution started ('started', from
-- journey_execution.started.v1 on the journeys topic), per execution that
-- ran out of steps or took an exit step ('completed', 'exited': the step
-- envelope whose final state says so) and per conversion ('converted', from
-- JOURNEY_CONVERTED on the webhooks topic, with the goal's value).
--
-- Exactly once for readers: id is the envelope id (a step's is derived
-- from its execution and address; a completion or exit row's is the step
-- envelope's id with '/completed' or '/exited'), so every copy of one
-- event has the same id, journey_id and at; ReplacingMergeTree() collapses
-- them on merges and readers deduplicate with LIMIT 1 BY id until then.
--
-- Runs on ClickHouse 18.16 and current ClickHouse: no LowCardinality,
-- DateTime64, TTL or Map. Monthly partitions of `at` (the copies of one
-- event share one), so retention drops whole partitions. step, step_type,
-- outcome, message_id and detail are '' except on step rows; final is the
-- execution's final state on the step row that ended it; trigger_type is set on
-- started rows; value (when has_value is 1), currency, goal_type and
-- conv_event (the event that converted) on converted rows.
CREATE TABLE IF NOT EXISTS journey_events
(
    id           String,
    workspace    String,
    journey_id   String,
    version      UInt32,
    execution_id String,
    contact_id   String,
    event        String,
    step         String,
    step_type    String,
    outcome      String,
    message_id   String,
    detail       String,
    final        String,
    trigger_type String,
    conv_event   String,
    goal_type    String,
    value        Float64,
    has_value    UInt8,
    currency     String,
    at           DateTime,
    received     DateTime
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (workspace, journey_id, at, id)
