-- Lock journey $2 of workspace $1 against status changes for the start's
-- transaction (archiving waits for it) and read what a start depends on.
SELECT status, trigger_type, reentry, current_version
  FROM journeys
 WHERE workspace_id = $1 AND id = $2
   FOR SHARE
