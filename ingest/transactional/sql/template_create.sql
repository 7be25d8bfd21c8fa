INSERT INTO templates (id, workspace_id, name, subject, preheader, html, text_body, required_variables, translations)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
