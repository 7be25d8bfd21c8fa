-- FROZEN: one row per round trip, the claim-or-skip shape of the hot path.
INSERT INTO bench_baseline.contacts (workspace_id, email, first_name)
VALUES ($1, $2, $3)
ON CONFLICT (workspace_id, email) DO NOTHING
RETURNING id
