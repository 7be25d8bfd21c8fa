package schemas

import (
	"encoding/json"
	"time"
)

// Envelope types of recorded events, goals and page views (spec 2.3, 4.6,
// 4.7). ingest/events publishes TypeEventRecorded on TopicEvents and
// ingest/tracking publishes TypePageViewed on TopicPageViews; the goals stage
// derives the other two from TypeEventRecorded envelopes that matched a
// contact, with ChildID ids so a replay publishes the same ids.
const (
	// TypeEventRecorded: an event (or goal) accepted by POST /v1/events,
	// /v1/events/import or /public/events. Payload EventPayload. The envelope
	// id is the event id the API answered with: IDFromKey(workspace,
	// EventIDScope, externalId) when the caller sent an externalId, else a
	// fresh NewID. Key: "<workspace>:<contactId>" when a contact matched
	// (one contact's events stay in order), else "<workspace>:<id>".
	TypeEventRecorded = "event.recorded.v1"

	// TypeEventMatched is internal, for journey matching: a recorded event
	// matched a contact, so journeys whose API Event or website-event
	// trigger listens for its name may start. Published on TopicContacts
	// (beside contact.joined_list.v1, so one contact's journey triggers stay
	// in order) with key "<workspace>:<contactId>" and id
	// ChildID(eventId, TypeEventMatched, 0). Payload EventPayload.
	TypeEventMatched = "contact.event_matched.v1"

	// TypeWebhookEventRecorded is EVENT_RECORDED (spec 6) for the webhook
	// fan-out, on TopicWebhooks, with key "<workspace>:<contactId>" and id
	// ChildID(eventId, TypeWebhookEventRecorded, 0) (stable across replays:
	// use it as the delivery's webhook-id). Payload EventRecordedData, which
	// is the delivery body's `data`.
	TypeWebhookEventRecorded = "webhook.event_recorded.v1"

	// TypeWebhookGoalRecorded is GOAL_RECORDED: a recorded event carrying a
	// goalType matched a contact. The goals stage returns it beside
	// EVENT_RECORDED, on TopicWebhooks, with key "<workspace>:<contactId>"
	// and id ChildID(eventId, TypeWebhookGoalRecorded, 0): the same id on a
	// redelivered or republished event, so every copy is one message to
	// receivers. Payload EventRecordedData (goalType always set).
	TypeWebhookGoalRecorded = "webhook.goal_recorded.v1"

	// TypePageViewed: an anonymous page view sent by track.js. Payload
	// PageViewPayload. Key "<workspace>".
	TypePageViewed = "pageview.recorded.v1"
)

// EventIDScope is the scope IDFromKey uses for event ids derived from an
// externalId.
const EventIDScope = "event"

// EventWebhookEvents maps the webhook envelope types of events, and of
// the journeys they start, complete and convert (journeys_webhooks.go), to
// the webhook event names of spec section 6; all travel on TopicWebhooks.
var EventWebhookEvents = map[string]string{
	TypeWebhookEventRecorded:    "EVENT_RECORDED",
	TypeWebhookGoalRecorded:     WebhookGoalRecorded,
	TypeWebhookJourneyStarted:   WebhookJourneyStarted,
	TypeWebhookJourneyCompleted: WebhookJourneyCompleted,
	TypeWebhookJourneyConverted: WebhookJourneyConverted,
}

// Goal types of spec 2.3.
const (
	GoalPurchase     = "purchase"
	GoalSubscription = "subscription"
	GoalLead         = "lead"
	GoalSignup       = "signup"
	GoalBooking      = "booking"
	GoalTrial        = "trial"
	GoalOther        = "other"
)

// GoalTypes lists every goal type in the order of spec 2.3.
var GoalTypes = []string{GoalPurchase, GoalSubscription, GoalLead, GoalSignup, GoalBooking, GoalTrial, GoalOther}

// Event sources: which endpoint accepted an event.
const (
	EventSourceAPI    = "api"    // POST /v1/events
	EventSourceImport = "import" // POST /v1/events/import
	EventSourcePublic = "public" // POST /public/events (tracking token, track.js or API key)
)

// EventPayload is the payload of event.recorded.v1 and
// contact.event_matched.v1: one accepted event, validated and normalised.
type EventPayload struct {
	// Event is the name (spec 2.3 rules already checked).
	Event string `json:"event"`
	// ContactID is the matched contact, "" when none matched (anonymous or
	// unknown email/contactId): such events start no journey and fire no
	// webhook.
	ContactID string `json:"contactId,omitempty"`
	// Email is the trimmed, lower-cased email the caller sent, if any.
	Email string `json:"email,omitempty"`
	// GoalType is one of GoalTypes, or "" for a plain event.
	GoalType string `json:"goalType,omitempty"`
	// Value is the goal's value as the caller wrote the JSON number (exact
	// decimal text, e.g. "19.99" or "-5"); "" when absent. Negative is a
	// refund.
	Value string `json:"value,omitempty"`
	// Currency is an ISO 4217 code in upper case, or "".
	Currency string `json:"currency,omitempty"`
	// ExternalID is the caller's idempotency key, or "".
	ExternalID string `json:"externalId,omitempty"`
	// OccurredAt is when the event happened (the caller's occurredAt, else
	// the time it was received), UTC.
	OccurredAt time.Time `json:"occurredAt"`
	// ReceivedAt is when ingest accepted it, UTC.
	ReceivedAt time.Time `json:"receivedAt"`
	// Properties is the caller's properties object as compact JSON, or nil.
	Properties json.RawMessage `json:"properties,omitempty"`
	// Source is the accepting endpoint: EventSourceAPI, EventSourceImport
	// or EventSourcePublic.
	Source string `json:"source"`
}

// EventRecordedData is the `data` of an EVENT_RECORDED webhook delivery
// (spec 6 leaves it not shown; Sendstream names it like the API's event
// fields).
type EventRecordedData struct {
	EventID    string          `json:"eventId"`
	Event      string          `json:"event"`
	ContactID  string          `json:"contactId"`
	Email      string          `json:"email,omitempty"`
	GoalType   string          `json:"goalType,omitempty"`
	Value      json.Number     `json:"value,omitempty"`
	Currency   string          `json:"currency,omitempty"`
	ExternalID string          `json:"externalId,omitempty"`
	OccurredAt time.Time       `json:"occurredAt"`
	Properties json.RawMessage `json:"properties,omitempty"`
}

// PageViewPayload is the payload of pageview.recorded.v1: one anonymous
// page view. No visitor identifier is kept (nothing persists between pages).
type PageViewPayload struct {
	// Host and Path of the page (no query string or fragment).
	Host string `json:"host"`
	Path string `json:"path"`
	// Title of the page, capped.
	Title string `json:"title,omitempty"`
	// ReferrerHost is the host of document.referrer, "" when none.
	ReferrerHost string `json:"referrerHost,omitempty"`
	// UTM parameters of the page URL, when present.
	UTMSource   string `json:"utmSource,omitempty"`
	UTMMedium   string `json:"utmMedium,omitempty"`
	UTMCampaign string `json:"utmCampaign,omitempty"`
	// ScreenWidth in CSS pixels, 0 when unknown.
	ScreenWidth int `json:"screenWidth,omitempty"`
	// UserAgent of the browser, capped.
	UserAgent string `json:"userAgent,omitempty"`
	// OccurredAt is when the beacon was received, UTC.
	OccurredAt time.Time `json:"occurredAt"`
}
