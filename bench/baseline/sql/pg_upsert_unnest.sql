-- FROZEN: many rows per round trip via unnest.
INSERT INTO bench_baseline.contacts (workspace_id, email, first_name)
SELECT $1, e, f FROM unnest($2::text[], $3::text[]) AS t(e, f)
ON CONFLICT (workspace_id, email) DO UPDATE SET first_name = EXCLUDED.first_name
