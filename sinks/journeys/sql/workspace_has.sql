-- Whether workspace $1 has a journey that is not archived: only then can
-- an event or a list join start or convert anything (archiving cancels a
-- journey's executions). Served by journeys_workspace.
SELECT EXISTS (SELECT 1 FROM journeys WHERE workspace_id = $1 AND status <> 'archived')
