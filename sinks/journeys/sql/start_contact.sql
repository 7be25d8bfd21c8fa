-- The contact of workspace $1 with id $2 or, when $2 is '', email $3.
SELECT id, email, status
  FROM contacts
 WHERE workspace_id = $1 AND (($2 <> '' AND id = $2) OR ($2 = '' AND email = $3))
