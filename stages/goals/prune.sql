-- Forget ledger entries older than $1 seconds, at most $2 per call: a
-- redelivery (bounded by the topic's retention) or a republished duplicate
-- (24 hours, see ingest/events) can no longer bring those events back.
DELETE FROM event_ledger
 WHERE event_id IN (SELECT event_id FROM event_ledger
                     WHERE applied_at < now() - make_interval(secs => $1)
                     LIMIT $2)
