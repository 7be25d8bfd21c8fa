-- The claims that stopped a claim (claim.sql returned no row for them).
SELECT delivery, attempt, throttled, state, outputs
FROM webhook_delivery_claims
WHERE delivery = ANY ($1::text[])
