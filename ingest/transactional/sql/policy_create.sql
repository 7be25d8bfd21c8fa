INSERT INTO send_policies (id, workspace_id, key, kind, from_email, from_name, provider)
VALUES ($1, $2, $3, $4, nullif($5, ''), nullif($6, ''), $7)
