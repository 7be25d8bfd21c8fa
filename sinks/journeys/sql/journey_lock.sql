-- Lock journey $2 of workspace $1 for a change and read what the change
-- depends on: status, trigger type, whether it has a trigger key, the
-- current version.
SELECT status, trigger_type, trigger_key_hash IS NOT NULL, current_version
  FROM journeys
 WHERE workspace_id = $1 AND id = $2
   FOR UPDATE
