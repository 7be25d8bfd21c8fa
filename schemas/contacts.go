package schemas

import (
	"encoding/json"
	"time"
)

// Envelope types published by ingest/contacts on TopicContacts. Every change
// to a contact or a list membership publishes one of these; the partition key
// is "<workspace>:<contactId>", so one contact's events stay in order.
//
// The webhook fan-out maps the public ones to spec section 6 event names with
// ContactWebhookEvents; the others are internal (journey matching, the
// confirmation mail).
const (
	// TypeContactCreated: a contact was created (upsert, list subscribe or a
	// hosted sign-up form). Payload ContactPayload. Webhook CONTACT_CREATED.
	TypeContactCreated = "contact.created.v1"
	// TypeContactUpdated: an upsert changed at least one field. Payload
	// ContactPayload with UpdatedFields. Webhook CONTACT_UPDATED.
	TypeContactUpdated = "contact.updated.v1"
	// TypeContactAddedToList: a membership became ACTIVE through
	// POST /v1/lists/{id}/subscribe or a sign-up form of a list without
	// double opt-in. Payload ListMembershipPayload. Webhook CONTACT_ADDED_TO_LIST.
	TypeContactAddedToList = "contact.added_to_list.v1"
	// TypeContactRemovedFromList: a membership became UNSUBSCRIBED. Payload
	// ListMembershipPayload. Webhook CONTACT_REMOVED_FROM_LIST.
	TypeContactRemovedFromList = "contact.removed_from_list.v1"
	// TypeListSubscriptionConfirmed: a double opt-in click moved a PENDING
	// membership to ACTIVE; one per list. Payload ListMembershipPayload.
	// Webhook LIST_SUBSCRIPTION_CONFIRMED.
	TypeListSubscriptionConfirmed = "list.subscription_confirmed.v1"
	// TypeContactConfirmed: a double opt-in click moved the contact itself
	// from PENDING to ACTIVE. Payload ContactConfirmedPayload. Webhook
	// CONTACT_CONFIRMED.
	TypeContactConfirmed = "contact.confirmed.v1"
	// TypeContactUnsubscribed: the contact's own status became
	// UNSUBSCRIBED (the unsubscribe link of a marketing email: its page or
	// the RFC 8058 one-click POST). Written through the contacts outbox in
	// the transaction that changes the status; a repeat changes nothing and
	// announces nothing. A complaint (status COMPLAINED) and a list
	// unsubscribe (the membership only) do not fire it. Payload
	// ContactUnsubscribedPayload. Webhook CONTACT_UNSUBSCRIBED.
	TypeContactUnsubscribed = "contact.unsubscribed.v1"
	// TypeContactJoinedList is internal, for journey matching: a membership
	// became ACTIVE by any path (subscribe, form without double opt-in, or a
	// confirmation click). Journeys that trigger on joining a list consume
	// it. Payload ListMembershipPayload.
	TypeContactJoinedList = "contact.joined_list.v1"
	// TypeOptInRequested is internal: a hosted sign-up to a double opt-in list
	// left a PENDING membership and a confirmation email must be sent. It is
	// the one type published on TopicOptIn instead of TopicContacts; the
	// stage stages/optin sends the email. Payload OptInRequestedPayload.
	TypeOptInRequested = "contact.optin_requested.v1"
)

// ContactWebhookEvents maps the public envelope types above to the webhook
// event names of spec section 6. Types not in the map are internal.
var ContactWebhookEvents = map[string]string{
	TypeContactCreated:            "CONTACT_CREATED",
	TypeContactUpdated:            "CONTACT_UPDATED",
	TypeContactAddedToList:        "CONTACT_ADDED_TO_LIST",
	TypeContactRemovedFromList:    "CONTACT_REMOVED_FROM_LIST",
	TypeListSubscriptionConfirmed: "LIST_SUBSCRIPTION_CONFIRMED",
	TypeContactConfirmed:          "CONTACT_CONFIRMED",
	TypeContactUnsubscribed:       WebhookContactUnsubscribed,
}

// ContactPayload is the payload of contact.created.v1 and
// contact.updated.v1: the contact after the change.
type ContactPayload struct {
	ContactID    string          `json:"contactId"`
	Email        string          `json:"email"`
	FirstName    *string         `json:"firstName"`
	Country      *string         `json:"country"`
	Language     *string         `json:"language"`
	Status       string          `json:"status"`
	Source       *string         `json:"source"`
	CustomFields json.RawMessage `json:"customFields"` // object, key to value
	Metadata     json.RawMessage `json:"metadata"`     // object or null
	CreatedAt    time.Time       `json:"createdAt"`
	UpdatedAt    time.Time       `json:"updatedAt"`
	// UpdatedFields names what an update changed ("firstName",
	// "customFields.plan", ...); empty on creation.
	UpdatedFields []string `json:"updatedFields,omitempty"`
}

// ListMembershipPayload is the payload of the list membership types: the
// contact, the list (spec 2.2: webhook list fields are listId and listName)
// and the membership status after the change.
type ListMembershipPayload struct {
	ContactID string `json:"contactId"`
	Email     string `json:"email"`
	ListID    string `json:"listId"`
	ListName  string `json:"listName"`
	Status    string `json:"status"`
	// Via says what moved the membership: "api", "form" or "confirmation".
	Via string `json:"via"`
}

// ContactConfirmedPayload is the payload of contact.confirmed.v1 (spec 6:
// contactId, email).
type ContactConfirmedPayload struct {
	ContactID string `json:"contactId"`
	Email     string `json:"email"`
}

// ContactUnsubscribedPayload is the payload of contact.unsubscribed.v1:
// the contact, its address and when its status changed.
type ContactUnsubscribedPayload struct {
	ContactID  string    `json:"contactId"`
	Email      string    `json:"email"`
	OccurredAt time.Time `json:"occurredAt"`
}

// ContactUnsubscribed returns the contact.unsubscribed.v1 envelope of
// contact id (address email) of workspace ws, unsubscribed at at, caused by
// causation (e.g. the message whose link was used; "" when none). Its id is
// fresh: the outbox row keeps it, so a republished row keeps it too.
func ContactUnsubscribed(ws, id, email string, at time.Time, causation string) Envelope {
	at = at.UTC()
	b := make([]byte, 0, 96+len(id)+len(email))
	b = append(b, `{"contactId":`...)
	b = AppendJSONString(b, id)
	b = append(b, `,"email":`...)
	b = AppendJSONString(b, email)
	b = append(b, `,"occurredAt":`...)
	b = AppendJSONTime(b, at)
	b = append(b, '}')
	return Envelope{ID: NewIDAt(at), Workspace: ws, Type: TypeContactUnsubscribed, Key: ws + ":" + id,
		OccurredAt: at, CausationID: causation, Payload: b}
}

// OptInRequestedPayload is the payload of contact.optin_requested.v1: what
// the confirmation email needs. ConfirmURL is the complete signed link; it
// is a bearer credential for confirming this contact's pending lists.
type OptInRequestedPayload struct {
	ContactID  string    `json:"contactId"`
	Email      string    `json:"email"`
	FirstName  string    `json:"firstName,omitempty"`
	ListID     string    `json:"listId"`
	ListName   string    `json:"listName"`
	ConfirmURL string    `json:"confirmUrl"`
	ExpiresAt  time.Time `json:"expiresAt"`
}
