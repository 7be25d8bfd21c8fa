-- The common case of claim.sql in one update: claim messages $1 that are
-- queued and unclaimed (or claimed by this stage's token $2). Returns the
-- ids claimed; claim.sql then sorts out the others (done, busy, stale or
-- without a row). The update takes its row locks as it goes, and a
-- concurrent claim's change makes it re-check its condition, so two
-- workers never both claim one message.
UPDATE transactional_messages
   SET claim_token = $2, claimed_at = now()
 WHERE id = ANY ($1::text[]) AND status = 'queued' AND (claim_token IS NULL OR claim_token = $2)
RETURNING id
