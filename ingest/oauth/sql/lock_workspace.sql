-- $1 workspace. Locks the workspace row so concurrent creations count apps
-- one at a time (the limit of 10 per workspace).
SELECT plan, (SELECT count(*) FROM oauth_apps WHERE workspace_id = $1)
FROM workspaces WHERE id = $1 FOR UPDATE
