INSERT INTO sendstream_bench.baseline_insert (workspace_id, event, contact_id, email_hash, goal_type, value, currency, occurred_at, received_at, properties)
