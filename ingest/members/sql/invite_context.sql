-- What an invitation of $2 (an email) to workspace $1 needs, read in the
-- invitation's transaction: the workspace's name; whether $2 is already a
-- member; whether $2 is on the suppression list for a reason every policy
-- refuses (bounced, complained, erased); and what its email goes out with,
-- as a transactional send without fromEmail or sendPolicy (stages/optin
-- sender.sql): the default Transactional policy (NULL columns: none is
-- stored) and the sending domains, oldest first. No row: the workspace is
-- gone.
SELECT w.name,
       EXISTS (SELECT 1 FROM members m WHERE m.workspace_id = w.id AND m.email = $2),
       EXISTS (SELECT 1 FROM suppressions s WHERE s.workspace_id = w.id AND s.email = $2
                  AND s.reason IN ('bounced', 'complained', 'erased')),
       p.id, p.kind, coalesce(p.from_email, ''), coalesce(p.from_name, ''), p.provider,
       coalesce((SELECT array_agg(d.domain ORDER BY d.created_at, d.domain)
                   FROM sending_domains d WHERE d.workspace_id = w.id), '{}')
  FROM workspaces w
  LEFT JOIN send_policies p ON p.workspace_id = w.id AND p.key = 'transactional'
 WHERE w.id = $1
