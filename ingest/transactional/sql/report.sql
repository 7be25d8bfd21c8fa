-- Apply one provider report. The message is found by service id or
-- Message-ID ($1), limited to workspace $2 unless $2 is ''. $3 new status
-- (delivered, bounced, complained), $4 when, $5 bounce type (hard, soft),
-- $6 reason, $7 complaint type, $8 the reported address ('' for the
-- message's recipient).
--
-- Status moves only forward: queued < sent < delivered < bounced <
-- complained; failed never moves; only a report about the message's own
-- recipient moves it (cc and bcc addresses are only suppressed). A hard bounce or a complaint of the
-- reported address suppresses it and marks its contact BOUNCED or
-- COMPLAINED, whether or not the status moved (reports may repeat).
WITH m AS (
    SELECT id, workspace_id, status, coalesce(nullif($8, ''), to_email) AS email FROM transactional_messages
     -- A Message-ID is <id>@<domain> (email.FormatMessageID): its id part
     -- finds the row by primary key, the whole must match too.
     WHERE (id = $1 OR (id = split_part($1, '@', 1) AND rfc_message_id = $1))
       AND ($2 = '' OR workspace_id = $2)
     LIMIT 1
),
moved AS (
    UPDATE transactional_messages t
       SET status = $3,
           sent_at = coalesce(t.sent_at, CASE WHEN t.status = 'queued' THEN $4::timestamptz END),
           delivered_at = CASE WHEN $3 = 'delivered' THEN $4::timestamptz ELSE t.delivered_at END,
           bounced_at = CASE WHEN $3 = 'bounced' THEN $4::timestamptz ELSE t.bounced_at END,
           bounce_type = CASE WHEN $3 = 'bounced' THEN $5 ELSE t.bounce_type END,
           bounce_reason = CASE WHEN $3 = 'bounced' THEN $6 ELSE t.bounce_reason END,
           complained_at = CASE WHEN $3 = 'complained' THEN $4::timestamptz ELSE t.complained_at END,
           complaint_type = CASE WHEN $3 = 'complained' THEN $7 ELSE t.complaint_type END,
           updated_at = now()
      FROM m
     WHERE t.id = m.id AND t.status <> 'failed' AND ($8 = '' OR t.to_email = $8)
       AND (CASE t.status WHEN 'queued' THEN 0 WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2
                          WHEN 'bounced' THEN 3 WHEN 'complained' THEN 4 END)
         < (CASE $3 WHEN 'delivered' THEN 2 WHEN 'bounced' THEN 3 WHEN 'complained' THEN 4 END)
    RETURNING t.id
),
sup AS (
    INSERT INTO suppressions (workspace_id, email, reason, message_id, detail)
    SELECT m.workspace_id, m.email, CASE $3 WHEN 'bounced' THEN 'bounced' ELSE 'complained' END, m.id, nullif($6, '')
      FROM m
     WHERE ($3 = 'bounced' AND $5 = 'hard') OR $3 = 'complained'
    ON CONFLICT (workspace_id, email, reason) DO NOTHING
),
contact AS (
    UPDATE contacts c
       SET status = CASE $3 WHEN 'bounced' THEN 'BOUNCED' ELSE 'COMPLAINED' END, updated_at = now()
      FROM m
     WHERE c.workspace_id = m.workspace_id AND c.email = m.email
       AND (($3 = 'bounced' AND $5 = 'hard' AND c.status NOT IN ('BOUNCED', 'COMPLAINED'))
         OR ($3 = 'complained' AND c.status <> 'COMPLAINED'))
)
SELECT t.id, t.workspace_id, t.to_email, t.rfc_message_id, coalesce(t.external_id, ''),
       coalesce(t.template_id, ''), t.policy_id, t.provider, m.status,
       EXISTS (SELECT 1 FROM moved)
  FROM m JOIN transactional_messages t ON t.id = m.id
