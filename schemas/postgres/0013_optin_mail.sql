-- Confirmation emails the optin stage has handed to the mail server, by the
-- envelope id that asked for them, so a replayed envelope is not mailed twice.
CREATE TABLE IF NOT EXISTS optin_mail_sent (
    envelope_id text PRIMARY KEY,
    sent_at     timestamptz NOT NULL DEFAULT now()
);
