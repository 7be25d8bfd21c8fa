INSERT INTO events (id, workspace, event, contact_id, email_hash, goal_type, value, has_value, currency, external_id, source, occurred_at, received_at, properties, inserted_at)
