-- The workspace's logged ok webhook attempts, distinct: webhook_attempts
-- collapses redelivered envelopes only when it merges.
SELECT uniqExact(event_id) FROM webhook_attempts WHERE workspace = ? AND outcome = 'ok'
