-- The journey whose trigger key hashes to $1.
SELECT id, workspace_id, name, status, trigger_type, coalesce(trigger_event, ''), coalesce(trigger_list_id, ''),
       reentry, trigger_key_hash IS NOT NULL, current_version, created_at, updated_at
  FROM journeys
 WHERE trigger_key_hash = $1
