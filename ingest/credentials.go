package ingest

import "sendstream/ingest/auth"

// SubscribeCredentials makes l evict from the server's credential cache
// what any process announces on the credential-change channel (the
// Postgres triggers of migration 0075, auth.Invalidate): a deleted key or
// a suspended workspace is refused by the next request after l hears it,
// instead of after the key-cache TTL. The caller runs l (one Listener per
// process); call this before Serve.
func (s *Server) SubscribeCredentials(l *auth.Listener) { l.Subscribe(s.auth.Evict) }
