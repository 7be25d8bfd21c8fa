package schemas

import (
	"encoding/json"
	"time"
)

// Transactional email (spec 2.4, 3.1, 4.2, 6). ingest/transactional accepts a
// send, stores the message (status queued) and publishes TypeTransactionalSend
// on TopicTransactional; the delivery stage renders and hands it to the
// provider and records sent or failed; provider reports move it on to
// delivered, bounced or complained. Every status change is published as
// TypeTransactionalStatus on TopicMessageStatus (the messagestatus stage
// writes them to ClickHouse; the delivery stage, which consumes
// TopicTransactional, never reads them) and, when public, as a webhook
// envelope on TopicWebhooks.
//
// Keys: every envelope of one message has the key "<workspace>:<messageId>",
// so one message's envelopes stay in order.
const (
	// TypeTransactionalSend: an accepted send awaiting delivery. Payload
	// SendPayload. The envelope id is the message id.
	TypeTransactionalSend = "transactional.send.v1"
	// TypeTransactionalStatus: a message changed status. Payload
	// StatusPayload. Id ChildID(cause, TypeTransactionalStatus, 0) where
	// cause is the envelope or report that moved it.
	TypeTransactionalStatus = "transactional.status.v1"

	// Webhook envelopes on TopicWebhooks; the payload is the delivery
	// body's `data` and the id is stable across replays (use it as the
	// delivery's webhook-id).

	// TypeWebhookTransactionalSent is TRANSACTIONAL_SENT: the provider took
	// the message. Payload MessageEventData.
	TypeWebhookTransactionalSent = "webhook.transactional_sent.v1"
	// TypeWebhookEmailDelivered is EMAIL_DELIVERED. Payload MessageEventData.
	TypeWebhookEmailDelivered = "webhook.email_delivered.v1"
	// TypeWebhookEmailBounced is EMAIL_BOUNCED. Payload EmailBouncedData.
	TypeWebhookEmailBounced = "webhook.email_bounced.v1"
	// TypeWebhookEmailComplained is EMAIL_COMPLAINED (Sendstream's name for
	// the complaint event). Payload EmailComplainedData.
	TypeWebhookEmailComplained = "webhook.email_complained.v1"
	// TypeWebhookTransactionalFailed is TRANSACTIONAL_FAILED: the delivery
	// stage recorded the message failed (refused by the provider, an
	// unknown hand-off outcome, no provider, a message that cannot be
	// built). Payload TransactionalFailedData.
	TypeWebhookTransactionalFailed = "webhook.transactional_failed.v1"
)

// TransactionalIDScope is the scope IDFromKey uses for message ids derived
// from an externalId (IDFromKey(workspace, TransactionalIDScope, externalId)).
const TransactionalIDScope = "transactional"

// MessageIDOf returns the id of the message sent with externalID in
// workspace ws, or "" when externalID is "" (such a message has a random
// id).
func MessageIDOf(ws, externalID string) string {
	if externalID == "" {
		return ""
	}
	return IDFromKey(ws, TransactionalIDScope, externalID)
}

// TransactionalWebhookEvents maps the webhook envelope types above to the
// webhook event names of spec section 6.
var TransactionalWebhookEvents = map[string]string{
	TypeWebhookTransactionalSent:   "TRANSACTIONAL_SENT",
	TypeWebhookEmailDelivered:      "EMAIL_DELIVERED",
	TypeWebhookEmailBounced:        "EMAIL_BOUNCED",
	TypeWebhookEmailComplained:     "EMAIL_COMPLAINED",
	TypeWebhookTransactionalFailed: WebhookTransactionalFailed,
}

// Message statuses of spec 3.1.
const (
	MessageQueued     = "queued"
	MessageSent       = "sent"
	MessageDelivered  = "delivered"
	MessageBounced    = "bounced"
	MessageComplained = "complained"
	MessageFailed     = "failed"
)

// MessageStatuses lists every message status.
var MessageStatuses = []string{MessageQueued, MessageSent, MessageDelivered, MessageBounced, MessageComplained, MessageFailed}

// Send policy kinds.
const (
	PolicyTransactional = "transactional"
	PolicyMarketing     = "marketing"
)

// Address is a mailbox: an address and an optional display name.
type Address struct {
	Email string `json:"email"`
	Name  string `json:"name,omitempty"`
}

// Attachment is one attachment of a send. ContentID set means an inline
// image referenced from the HTML as cid:<ContentID>.
type Attachment struct {
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	ContentID   string `json:"contentId,omitempty"`
	Content     []byte `json:"content"` // base64 in JSON
}

// RecipientContact is the contact a send renders with (`contact.*`,
// `customField.*`): the stored contact merged with the request's `contact`
// object. ID is empty when no contact record exists.
type RecipientContact struct {
	ID           string         `json:"id,omitempty"`
	Email        string         `json:"email"`
	FirstName    string         `json:"firstName,omitempty"`
	Country      string         `json:"country,omitempty"`
	Language     string         `json:"language,omitempty"`
	Status       string         `json:"status,omitempty"`
	CustomFields map[string]any `json:"customFields,omitempty"`
}

// SendPayload is the payload of transactional.send.v1: everything the
// delivery stage needs to render, build and hand off one message. Template
// sources travel with the message, so what is delivered is what was
// accepted even if the template changes meanwhile.
//
// When the encoded payload would exceed the broker's message size (large
// attachments or bodies), ingest stores it in Postgres
// (transactional_payloads) and publishes a SendPayload with only MessageID
// and Spilled set; the stage loads the stored one.
type SendPayload struct {
	MessageID    string `json:"messageId"`    // the service's message id (= envelope id)
	RFCMessageID string `json:"rfcMessageId"` // Message-ID header value, without angle brackets
	Spilled      bool   `json:"spilled,omitempty"`

	ExternalID    string `json:"externalId,omitempty"`
	WorkspaceName string `json:"workspaceName,omitempty"`

	From    Address   `json:"from"`
	To      string    `json:"to"`
	Cc      []string  `json:"cc,omitempty"`
	Bcc     []string  `json:"bcc,omitempty"`
	ReplyTo string    `json:"replyTo,omitempty"`
	Policy  PolicyRef `json:"policy"`

	TemplateID      string `json:"templateId,omitempty"`
	TemplateVersion int64  `json:"templateVersion,omitempty"`
	Language        string `json:"language,omitempty"` // the translation used, "" for the default

	// Liquid sources.
	Subject   string `json:"subject"`
	Preheader string `json:"preheader,omitempty"`
	HTML      string `json:"html"`
	Text      string `json:"text,omitempty"`
	// HTMLJSON, when set, is HTML already encoded as a JSON string
	// (AppendJSONString(nil, HTML)): AppendSendPayload copies it instead of
	// encoding HTML again. Never decoded.
	HTMLJSON []byte `json:"-"`

	Data json.RawMessage `json:"data,omitempty"` // the request's data object
	// DataCompact promises that Data is valid JSON without whitespace
	// outside strings (a span of a request body the server checked), so
	// AppendSendPayload does not check it again. Not serialised.
	DataCompact bool `json:"-"`

	Contact *RecipientContact `json:"contact,omitempty"`

	Attachments []Attachment `json:"attachments,omitempty"`
	AcceptedAt  time.Time    `json:"acceptedAt"`
}

// PolicyRef is the send policy a message was accepted under.
type PolicyRef struct {
	ID       string `json:"id"`
	Key      string `json:"key"`
	Kind     string `json:"kind"`     // PolicyTransactional or PolicyMarketing
	Provider string `json:"provider"` // provider plugin name, e.g. "smtp"
}

// StatusPayload is the payload of transactional.status.v1: one status
// change of one message.
type StatusPayload struct {
	MessageID  string    `json:"messageId"`
	Status     string    `json:"status"` // the new status
	At         time.Time `json:"at"`
	To         string    `json:"to"`
	ExternalID string    `json:"externalId,omitempty"`
	TemplateID string    `json:"templateId,omitempty"`
	PolicyID   string    `json:"policyId,omitempty"`
	Provider   string    `json:"provider,omitempty"`
	// Detail: the failure reason, "<bounceType>: <reason>" or the
	// complaint type.
	Detail string `json:"detail,omitempty"`
}

// MessageEventData is the webhook `data` of TRANSACTIONAL_SENT and
// EMAIL_DELIVERED. MessageID is the service's message id (the `id` of the
// send response, usable with GET /v1/transactional/{messageId}/status);
// RFCMessageID is the Message-ID header (the send response's `messageId`).
type MessageEventData struct {
	MessageID    string    `json:"messageId"`
	RFCMessageID string    `json:"rfcMessageId"`
	Email        string    `json:"email"`
	ExternalID   string    `json:"externalId,omitempty"`
	Provider     string    `json:"provider"`
	OccurredAt   time.Time `json:"occurredAt"`
}

// TransactionalFailedData is the webhook `data` of TRANSACTIONAL_FAILED:
// the message, as in MessageEventData, and why it failed.
type TransactionalFailedData struct {
	MessageID    string    `json:"messageId"`
	RFCMessageID string    `json:"rfcMessageId,omitempty"`
	Email        string    `json:"email"`
	ExternalID   string    `json:"externalId,omitempty"`
	Provider     string    `json:"provider"`
	Reason       string    `json:"reason"`
	OccurredAt   time.Time `json:"occurredAt"`
}

// EmailBouncedData is the webhook `data` of EMAIL_BOUNCED (spec 6: email,
// messageId, provider, type, reason, occurredAt). Type is "hard" (the
// address is suppressed) or "soft".
type EmailBouncedData struct {
	Email        string    `json:"email"`
	MessageID    string    `json:"messageId"`
	Provider     string    `json:"provider"`
	Type         string    `json:"type"`
	Reason       string    `json:"reason"`
	OccurredAt   time.Time `json:"occurredAt"`
	RFCMessageID string    `json:"rfcMessageId,omitempty"`
	ExternalID   string    `json:"externalId,omitempty"`
}

// EmailComplainedData is the webhook `data` of EMAIL_COMPLAINED: the
// recipient marked the message as spam. Type is the feedback type the
// provider reported ("abuse", …) or "complaint".
type EmailComplainedData struct {
	Email        string    `json:"email"`
	MessageID    string    `json:"messageId"`
	Provider     string    `json:"provider"`
	Type         string    `json:"type"`
	OccurredAt   time.Time `json:"occurredAt"`
	RFCMessageID string    `json:"rfcMessageId,omitempty"`
	ExternalID   string    `json:"externalId,omitempty"`
}
