-- Replaces an endpoint's secret with $3 (sealed): the current one becomes
-- the previous one and signs beside the new one until $4. A secret sealed
-- for an endpoint opens under either column (the seal binds the endpoint
-- id, not the column). No row: unknown id or another workspace's.
UPDATE webhook_endpoints
SET previous_secret_enc = secret_enc, secret_enc = $3, previous_expires_at = $4, updated_at = $5
WHERE workspace_id = $1 AND id = $2
RETURNING id, url, events, enabled, disabled_reason, disabled_at, failing_since,
          previous_expires_at, created_at, updated_at
