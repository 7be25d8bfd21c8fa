-- The credential-change channel, auth.Channel (payloads: sql/notify.sql).
LISTEN sendstream_auth
