package pipeline

import (
	"context"

	"sendstream/schemas"
)

// Mailer sends an email through the transactional path exactly as POST
// /v1/transactional/send does: send policy, suppression (bounced,
// complained and erased always; unsubscribed under a marketing policy),
// template and render check, the message stored as queued and unique per
// ExternalID. It publishes nothing: the envelopes to publish are in the
// result, for the stage to return. The root wiring passes
// ingest/transactional's implementation in Resources.Mailer, so stages
// send without importing ingest. Safe for concurrent use; an error means
// nothing was decided (retry).
type Mailer interface {
	SendEmail(ctx context.Context, m schemas.MailRequest) (schemas.MailResult, error)
}
