-- A template of workspace $1 by id.
SELECT id, name, subject, preheader, html, text_body, required_variables, translations, version
  FROM templates WHERE workspace_id = $1 AND id = $2
