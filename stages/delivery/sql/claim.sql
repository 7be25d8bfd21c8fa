-- Claim messages for hand-off: $1 message ids, $2 this stage's claim token,
-- $3 the claim lease in seconds. One row per id that exists:
--   claimed: queued and unclaimed (or claimed by this token): now ours;
--   done:    no longer queued (sent, failed, or moved on by a report);
--   busy:    queued and claimed by another worker within the lease;
--   stale:   claimed by another worker longer than the lease ago: that
--            worker died mid hand-off, so the outcome is unknown and the
--            message is failed rather than risk sending it twice.
-- Then what a done message's outcome was (its sent or failure time and
-- reason), so that a redelivered envelope returns the same outputs.
WITH cand AS (
    SELECT m.id, m.status, m.claim_token, m.claimed_at, m.sent_at, m.failed_at, m.failure_reason
      FROM transactional_messages m
     WHERE m.id = ANY ($1::text[])
     ORDER BY m.id
       FOR UPDATE
),
claimed AS (
    UPDATE transactional_messages t
       SET claim_token = $2, claimed_at = now()
      FROM cand c
     WHERE t.id = c.id AND c.status = 'queued' AND (c.claim_token IS NULL OR c.claim_token = $2)
    RETURNING t.id
),
stale AS (
    UPDATE transactional_messages t
       SET status = 'failed', failed_at = now(), updated_at = now(), claim_token = NULL,
           failure_reason = 'delivery outcome unknown: the worker handing it to the provider stopped; not retried to avoid sending twice'
      FROM cand c
     WHERE t.id = c.id AND c.status = 'queued' AND c.claim_token IS NOT NULL AND c.claim_token <> $2
       AND c.claimed_at < now() - make_interval(secs => $3)
    RETURNING t.id, t.failed_at
)
SELECT c.id,
       CASE WHEN c.id IN (SELECT id FROM claimed) THEN 'claimed'
            WHEN c.id IN (SELECT id FROM stale) THEN 'stale'
            WHEN c.status <> 'queued' THEN 'done'
            ELSE 'busy' END,
       c.status, c.sent_at, coalesce((SELECT s.failed_at FROM stale s WHERE s.id = c.id), c.failed_at),
       coalesce(c.failure_reason, '')
  FROM cand c
