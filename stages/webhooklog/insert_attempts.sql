INSERT INTO webhook_attempts (event_id, workspace, target_kind, target_id, url, event, message_id, attempt, outcome, status_code, duration_ms, error, next_attempt_at, at, replay, received)
