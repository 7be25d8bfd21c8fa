-- Confirmation emails of double opt-in are transactional messages now (the
-- optin stage stores them in transactional_messages, by an id derived from
-- the envelope id, and the delivery stage claims each once), so the optin
-- stage's own record of what it mailed is gone.
DROP TABLE IF EXISTS optin_mail_sent;
