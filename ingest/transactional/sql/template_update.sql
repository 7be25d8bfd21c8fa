-- Replace a template's content; its version goes up, so caches pick it up.
UPDATE templates
   SET name = $3, subject = $4, preheader = $5, html = $6, text_body = $7,
       required_variables = $8, translations = $9, version = version + 1, updated_at = now()
 WHERE workspace_id = $1 AND id = $2
RETURNING version
