-- Journey $2 of workspace $1.
SELECT id, workspace_id, name, status, trigger_type, coalesce(trigger_event, ''), coalesce(trigger_list_id, ''),
       reentry, trigger_key_hash IS NOT NULL, current_version, created_at, updated_at
  FROM journeys
 WHERE workspace_id = $1 AND id = $2
