-- Which of the templates ($2), lists ($3) and send policies ($4, keys or
-- ids) a definition names do not exist in workspace $1. The built-in
-- transactional policy always exists.
SELECT 'template', t FROM unnest($2::text[]) AS t
 WHERE NOT EXISTS (SELECT 1 FROM templates WHERE workspace_id = $1 AND id = t)
UNION ALL
SELECT 'list', l FROM unnest($3::text[]) AS l
 WHERE NOT EXISTS (SELECT 1 FROM lists WHERE workspace_id = $1 AND id = l)
UNION ALL
SELECT 'sendPolicy', p FROM unnest($4::text[]) AS p
 WHERE p <> 'transactional'
   AND NOT EXISTS (SELECT 1 FROM send_policies WHERE workspace_id = $1 AND (key = p OR id = p))
