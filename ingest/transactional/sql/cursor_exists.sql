-- Whether message $2 belongs to workspace $1 (a valid `before` cursor).
SELECT EXISTS (SELECT 1 FROM transactional_messages WHERE workspace_id = $1 AND id = $2)
