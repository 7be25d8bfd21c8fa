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

// ContactWriter changes contacts for stages the way the contacts API does
// (the journey engine's update_contact, add_to_list and remove_from_list
// steps): through the contacts store, whose transaction writes the change's
// domain events (contact.updated, added/removed/joined list) into the
// contacts outbox. It returns those events, all for
// schemas.TopicContacts, so the stage publishes them at once; the outbox
// relay publishes them again after its grace period under the same ids
// (consumers deduplicate by id), so none is lost if the stage dies before
// publishing. key names the change (a retry with the same key announces
// under the same ids). refused says why nothing changed when the request
// cannot apply (a list or custom field the workspace lacks, a value of the
// wrong type); errors mean nothing was decided (retry). The root wiring
// passes ingest/contacts' implementation in Resources.Contacts.
type ContactWriter interface {
	UpdateContact(ctx context.Context, ws, email string, set schemas.JourneyContactSet, key string) (events []schemas.Envelope, refused string, err error)
	SetListMembership(ctx context.Context, ws, contactID, listID string, member bool, key string) (events []schemas.Envelope, refused string, err error)
}
