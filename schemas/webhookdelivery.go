package schemas

import (
	"encoding/json"
	"time"
)

// Outgoing webhook delivery (spec 2.5, 2.6, 6; issue 25). The fan-out stages
// read domain events (TopicContacts, TopicWebhooks, TopicMessageStatus),
// find the workspace's REST hook subscriptions and dashboard endpoints that
// want each public event, and publish one TypeWebhookDelivery per target on
// TopicWebhookDeliveries. The delivery stage POSTs it (signed when the target
// has a secret) and publishes one TypeWebhookAttempt per attempt on
// TopicWebhookAttempts, which the delivery-log stage writes to ClickHouse.
// Later attempts of the schedule are durable jobs that publish the delivery
// again with the next attempt number; a replay publishes it again too.
//
// Keys: a delivery and its attempts have the key
// "<workspace>:<targetId>/<messageId>", so one message's attempts to one
// target are handled in order and one target's messages concurrently; the
// delivery stage bounds the calls per target and defers the rest, so a slow
// target holds neither a partition nor the others' calls.
const (
	// TopicWebhookDeliveries carries one envelope per (event, target) to
	// deliver or deliver again.
	TopicWebhookDeliveries = "sendstream.webhookdeliveries.v1"
	// TopicWebhookAttempts carries one envelope per delivery attempt.
	TopicWebhookAttempts = "sendstream.webhookattempts.v1"

	// TypeWebhookDelivery is one message to deliver to one target.
	// Payload WebhookDelivery. The envelope id is
	// ChildID(MessageID+"/"+TargetID, TypeWebhookDelivery, Attempt).
	TypeWebhookDelivery = "webhook.delivery.v1"
	// TypeWebhookAttempt is the outcome of one attempt. Payload
	// WebhookAttempt. The envelope id is
	// ChildID(MessageID+"/"+TargetID, TypeWebhookAttempt, Attempt).
	TypeWebhookAttempt = "webhook.attempt.v1"
)

// Webhook target kinds.
const (
	WebhookTargetEndpoint     = "endpoint"     // a dashboard endpoint (signed when it has a secret)
	WebhookTargetSubscription = "subscription" // a REST hook (spec 2.5)
)

// Webhook attempt outcomes.
const (
	WebhookOutcomeOK        = "ok"        // a 2xx answer
	WebhookOutcomeRetry     = "retry"     // failed; NextAttemptAt says when it is tried again
	WebhookOutcomeFailed    = "failed"    // failed, and the schedule is used up
	WebhookOutcomeThrottled = "throttled" // 429: rescheduled without counting an attempt
	WebhookOutcomeRetired   = "retired"   // 410: the endpoint is disabled or the subscription deleted
	WebhookOutcomeSkipped   = "skipped"   // the target is gone or disabled: not sent
)

// WebhookDelivery is the payload of TypeWebhookDelivery. Secrets never
// travel on the topic: the delivery stage reads the target's current
// secrets from Postgres.
type WebhookDelivery struct {
	// MessageID is the delivery body's `id` and the webhook-id header:
	// stable across attempts and replays (the domain event's id).
	MessageID  string    `json:"messageId"`
	Event      string    `json:"event"` // public event name, e.g. CONTACT_CREATED
	TargetKind string    `json:"targetKind"`
	TargetID   string    `json:"targetId"`
	URL        string    `json:"url"`
	Attempt    int       `json:"attempt"` // 1-based number in the schedule of spec 6
	Throttled  int       `json:"throttled,omitempty"`
	FirstAt    time.Time `json:"firstAt"` // when the first attempt was due
	// Body is the exact JSON body to POST (spec 2.6: id, event,
	// timestamp, teamId, data); it is signed as it is.
	Body json.RawMessage `json:"body"`
	// Replay is set when an operator asked for the delivery again.
	Replay bool `json:"replay,omitempty"`
}

// WebhookAttempt is the payload of TypeWebhookAttempt: one row of the
// delivery log.
type WebhookAttempt struct {
	MessageID  string `json:"messageId"`
	Event      string `json:"event"`
	TargetKind string `json:"targetKind"`
	TargetID   string `json:"targetId"`
	URL        string `json:"url"`
	Attempt    int    `json:"attempt"`
	// Throttled numbers the 429 answers of this delivery (outcome
	// throttled: the attempt number did not advance); 0 otherwise.
	Throttled     int        `json:"throttled,omitempty"`
	Outcome       string     `json:"outcome"`
	StatusCode    int        `json:"statusCode,omitempty"` // 0: no answer
	DurationMs    float64    `json:"durationMs"`
	Error         string     `json:"error,omitempty"` // bounded text
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	At            time.Time  `json:"at"`
	Replay        bool       `json:"replay,omitempty"`
}

// WebhookDeliveryKey is the key of the deliveries (and attempts) of message
// msg to target of workspace ws: "<ws>:<target>/<msg>". The fan-out, the
// scheduled retries and replays all use it, so one message's attempts to one
// target stay in order.
func WebhookDeliveryKey(ws, target, msg string) string { return ws + ":" + target + "/" + msg }
