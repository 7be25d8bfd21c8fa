-- The custom field definitions of workspace $1: key, type.
SELECT key, type FROM custom_fields WHERE workspace_id = $1
