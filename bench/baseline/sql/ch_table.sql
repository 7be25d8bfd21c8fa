CREATE TABLE sendstream_bench.baseline_insert (
    workspace_id String,
    event        String,
    contact_id   String,
    email_hash   String,
    goal_type    String,
    value        Float64,
    currency     String,
    occurred_at  DateTime,
    received_at  DateTime,
    properties   String
) ENGINE = MergeTree() PARTITION BY toYYYYMM(occurred_at) ORDER BY (workspace_id, event, occurred_at)
