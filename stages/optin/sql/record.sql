-- Record that the confirmation email of envelope $1 was handed to the mail server.
INSERT INTO optin_mail_sent (envelope_id) VALUES ($1) ON CONFLICT (envelope_id) DO NOTHING
