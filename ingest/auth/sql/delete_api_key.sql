-- $1 workspace id, $2 key id
DELETE FROM api_keys WHERE workspace_id = $1 AND id = $2
