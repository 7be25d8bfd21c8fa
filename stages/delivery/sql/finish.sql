-- Record hand-off outcomes of messages claimed with token $1: arrays of
-- equal length $2 id, $3 outcome ('sent' or 'failed'), $4 failure reason,
-- $5 provider message id, $6 the subject as rendered and $7 whether it
-- rendered (a failure before rendering keeps what the row has). A message
-- a provider report already moved on keeps its status (sent_at is still
-- recorded). Stored payloads go.
WITH u AS (
    SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::boolean[]) AS u(id, outcome, reason, provider_id, subject, rendered)
),
done AS (
    UPDATE transactional_messages t
       SET status = CASE WHEN t.status = 'queued' THEN u.outcome ELSE t.status END,
           sent_at = CASE WHEN u.outcome = 'sent' THEN coalesce(t.sent_at, now()) ELSE t.sent_at END,
           failed_at = CASE WHEN u.outcome = 'failed' THEN now() ELSE t.failed_at END,
           failure_reason = CASE WHEN u.outcome = 'failed' THEN u.reason ELSE t.failure_reason END,
           provider_message_id = nullif(u.provider_id, ''),
           subject = CASE WHEN u.rendered THEN u.subject ELSE t.subject END,
           claim_token = NULL, updated_at = now()
      FROM u
     WHERE t.id = u.id AND t.claim_token = $1
    RETURNING t.id, t.sent_at, t.failed_at
),
gone AS (
    DELETE FROM transactional_payloads p USING done d WHERE p.message_id = d.id
)
SELECT id, coalesce(sent_at, failed_at) FROM done
