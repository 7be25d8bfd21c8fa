-- Create a journey at version 1 and its first version, in one statement:
-- $1 id, $2 workspace, $3 name, $4 status, $5 trigger type, $6 trigger
-- event, $7 trigger list id, $8 reentry, $9 trigger key hash (null when
-- none), $10 the definition's canonical JSON, $11 now.
WITH j AS (
    INSERT INTO journeys (id, workspace_id, name, status, trigger_type, trigger_event, trigger_list_id,
                          reentry, trigger_key_hash, current_version, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, $11, $11)
    RETURNING id
)
INSERT INTO journey_versions (journey_id, version, definition, created_at)
SELECT j.id, 1, $10::jsonb, $11 FROM j
