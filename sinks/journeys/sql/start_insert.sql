-- Create execution $1: workspace $2, journey $3, version $4, contact $5,
-- position $6, trigger type $7, source id $8 (null for none), trigger
-- data $9, started at $10, ancestry $11 (null: no journey step caused it).
INSERT INTO journey_executions (id, workspace_id, journey_id, version, contact_id, state, position,
                                trigger_type, source_id, trigger_data, started_at, updated_at, ancestry)
VALUES ($1, $2, $3, $4, $5, 'active', $6, $7, $8, $9::jsonb, $10, $10, $11)
