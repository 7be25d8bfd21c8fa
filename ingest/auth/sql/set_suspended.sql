-- $1 workspace id, $2 suspended
UPDATE workspaces SET suspended = $2, updated_at = now() WHERE id = $1
