-- Claims attempt ($2, $3) of each delivery $1 (arrays, one element per
-- delivery, no delivery twice; $4: the envelope is a replay's): a delivery
-- without a row, or whose row holds an earlier (attempt, throttled) and is
-- not done (a replay may claim a done one), gets the claim. Returns the
-- claimed deliveries.
INSERT INTO webhook_delivery_claims AS c (delivery, attempt, throttled, state, replay, claimed_at)
SELECT d, a, t, 'sending', r, now()
FROM unnest($1::text[], $2::int[], $3::int[], $4::boolean[]) AS u (d, a, t, r)
ON CONFLICT (delivery) DO UPDATE
SET attempt = EXCLUDED.attempt, throttled = EXCLUDED.throttled, state = 'sending', replay = EXCLUDED.replay,
    outputs = NULL, claimed_at = EXCLUDED.claimed_at
WHERE (c.state <> 'done' OR EXCLUDED.replay) AND (c.attempt, c.throttled) < (EXCLUDED.attempt, EXCLUDED.throttled)
RETURNING delivery
