-- Claims of outgoing webhook attempts (issue 25: kill -9 between attempts
-- sends no message twice within one attempt number). One row per delivery
-- (a message to a target; a replay is a delivery of its own): the delivery
-- stage claims attempt (attempt, throttled) before it sends it, so an
-- envelope handled again after a crash resumes after the claimed attempt
-- instead of sending it again (stages/webhookdelivery claims.go). state:
-- 'sending' while the claimed attempt's outcome is unknown, 'settled' once
-- it failed and the next attempt is scheduled, 'done' after a success or
-- the last attempt; outputs holds the attempt rows (JSON envelopes) the
-- settling Handle returned, returned again if its envelope comes back.
-- replay: the claim is a replay's (admin webhook replay), which may claim
-- a delivery that is done again, with a higher attempt number. Rows are
-- pruned 3 days after their last claim.
CREATE TABLE IF NOT EXISTS webhook_delivery_claims (
    delivery   text        PRIMARY KEY,
    attempt    integer     NOT NULL,
    throttled  integer     NOT NULL,
    state      text        NOT NULL,
    replay     boolean     NOT NULL,
    outputs    bytea,
    claimed_at timestamptz NOT NULL,
    CONSTRAINT webhook_delivery_claims_state CHECK (state IN ('sending', 'settled', 'done'))
) WITH (fillfactor = 70);
-- The pruning scan: rows are written roughly in claimed_at order.
CREATE INDEX IF NOT EXISTS webhook_delivery_claims_claimed_at ON webhook_delivery_claims USING brin (claimed_at);
