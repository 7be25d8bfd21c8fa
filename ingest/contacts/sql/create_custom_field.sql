-- Define custom field $2 of type $3 in workspace $1; returns the type the key
-- has afterwards (the existing one when it was already defined).
WITH ins AS (
    INSERT INTO custom_fields (workspace_id, key, type) VALUES ($1, $2, $3)
    ON CONFLICT (workspace_id, key) DO NOTHING
    RETURNING type
)
SELECT type FROM ins
UNION ALL
SELECT type FROM custom_fields WHERE workspace_id = $1 AND key = $2 AND NOT EXISTS (SELECT 1 FROM ins)
