-- Every list of workspace $1, oldest first, with its membership count.
SELECT id, name, double_opt_in, contact_count, created_at
  FROM lists WHERE workspace_id = $1
 ORDER BY created_at, id
