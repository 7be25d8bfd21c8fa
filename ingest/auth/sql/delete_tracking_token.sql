-- $1 workspace id, $2 token id. The trigger of migration 0075 announces
-- the deletion to every process's credential cache when this commits.
DELETE FROM tracking_tokens WHERE workspace_id = $1 AND id = $2
