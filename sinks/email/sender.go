package email

// DefaultFromEmail is the sender of last resort: the one of a message whose
// send policy names no sender, from a workspace that owns no domain.
const DefaultFromEmail = "noreply@sendstream.local"

// DefaultSender returns the sender address of a message that names none:
// the send policy's (policyFrom), else noreply@ the workspace's first
// domain (domains oldest first), else fallback (DefaultFromEmail when
// empty). ingest/transactional (a send without fromEmail) and stages/optin
// (every confirmation) choose their sender with it.
func DefaultSender(policyFrom string, domains []string, fallback string) string {
	switch {
	case policyFrom != "":
		return policyFrom
	case len(domains) > 0:
		return "noreply@" + domains[0]
	case fallback != "":
		return fallback
	}
	return DefaultFromEmail
}
