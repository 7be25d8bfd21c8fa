-- 1 when the confirmation email of envelope $1 was already sent.
SELECT 1 FROM optin_mail_sent WHERE envelope_id = $1
