INSERT INTO message_status (event_id, workspace, message_id, status, at, recipient, external_id, template_id, policy_id, provider, detail, received)
