-- What a confirmation email of workspace $1 is sent with, as a
-- transactional send without fromEmail or sendPolicy would be: its default
-- Transactional policy (NULL columns: none is stored and the built-in one
-- applies) and its sending domains, oldest first. No row: the workspace is
-- gone.
SELECT p.id, p.kind, coalesce(p.from_email, ''), coalesce(p.from_name, ''), p.provider,
       coalesce((SELECT array_agg(d.domain ORDER BY d.created_at, d.domain)
                   FROM sending_domains d WHERE d.workspace_id = w.id), '{}')
  FROM workspaces w
  LEFT JOIN send_policies p ON p.workspace_id = w.id AND p.key = 'transactional'
 WHERE w.id = $1
