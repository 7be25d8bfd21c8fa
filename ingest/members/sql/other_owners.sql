-- $1 workspace, $2 member: how many other owners the workspace has, their
-- rows locked so two owners removing each other at once cannot both win.
SELECT count(*) FROM (SELECT id FROM members WHERE workspace_id = $1 AND role = 'owner' AND id <> $2 FOR UPDATE) o
