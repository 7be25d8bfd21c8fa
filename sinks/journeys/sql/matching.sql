-- The active journeys of workspace $1 with trigger type $2 listening for
-- $3: an event name (event, website_event) or a list id (list_joined). The
-- partial indexes journeys_active_event and journeys_active_list serve it.
SELECT id, workspace_id, name, status, trigger_type, coalesce(trigger_event, ''), coalesce(trigger_list_id, ''),
       reentry, trigger_key_hash IS NOT NULL, current_version, created_at, updated_at
  FROM journeys
 WHERE workspace_id = $1 AND status = 'active' AND trigger_type = $2
   AND (($2 IN ('event', 'website_event') AND trigger_event = $3) OR ($2 = 'list_joined' AND trigger_list_id = $3))
 ORDER BY created_at, id
