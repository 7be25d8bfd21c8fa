-- Forgets claims whose last claim is older than $1 seconds, at most $2
-- of them (the pruning job repeats until fewer are left).
DELETE FROM webhook_delivery_claims
WHERE delivery IN (
    SELECT delivery FROM webhook_delivery_claims
    WHERE claimed_at < now() - make_interval(secs => $1)
    LIMIT $2
)
