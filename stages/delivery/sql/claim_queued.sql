-- The common case of claim.sql in one update: claim messages $1 that are
-- queued and unclaimed (or claimed by this stage's token $2). Returns the
-- ids claimed; claim.sql then sorts out the others (done, busy, stale or
-- without a row). The update takes its row locks as it goes, and a
-- concurrent claim's change makes it re-check its condition, so two
-- workers never both claim one message.
--
-- The status test is written `(...) IS TRUE` so that no index can take it:
-- the delivery pool plans generically, and a plan made while the table was
-- nearly empty otherwise scanned the whole status index for status =
-- 'queued' on every claim as the table grew (7 ms a batch at 30k rows, a
-- seventh of Postgres's time per message in the first minute of a fresh
-- database). By primary key alone, a claim reads only its own rows.
UPDATE transactional_messages
   SET claim_token = $2, claimed_at = now()
 WHERE id = ANY ($1::text[]) AND (status = 'queued') IS TRUE AND (claim_token IS NULL OR claim_token = $2)
RETURNING id
