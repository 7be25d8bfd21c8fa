-- Write a new version of journey $1 and make it current: $2 name, $3
-- status, $4 trigger type, $5 trigger event, $6 trigger list id, $7
-- reentry, $8 a new trigger key hash (null keeps the one there), $9 the
-- definition's canonical JSON, $10 now. Returns the new version number.
WITH j AS (
    UPDATE journeys
       SET name = $2, status = $3, trigger_type = $4, trigger_event = $5, trigger_list_id = $6, reentry = $7,
           trigger_key_hash = coalesce($8, trigger_key_hash), current_version = current_version + 1, updated_at = $10
     WHERE id = $1
    RETURNING id, current_version
)
INSERT INTO journey_versions (journey_id, version, definition, created_at)
SELECT j.id, j.current_version, $9::jsonb, $10 FROM j
RETURNING version
