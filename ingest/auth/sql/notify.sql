-- $1 payload (auth.Change.String). Delivered to every LISTEN sendstream_auth
-- session when the calling transaction commits; the channel is auth.Channel.
SELECT pg_notify('sendstream_auth', $1)
