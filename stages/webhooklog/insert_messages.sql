INSERT INTO webhook_messages (workspace, target_id, message_id, target_kind, url, event, first_at, attempt, body, received)
