-- Claim $4 units of the window ($1 workspace, $2 endpoint, $3 unix minute).
-- Row locks serialise concurrent claims, so each sees the exact total before
-- it: the caller grants min($4, limit - (used - $4)) units.
INSERT INTO rate_windows AS r (workspace_id, endpoint, window_min, used)
VALUES ($1, $2, $3, $4)
ON CONFLICT (workspace_id, endpoint, window_min)
DO UPDATE SET used = r.used + EXCLUDED.used
RETURNING used
