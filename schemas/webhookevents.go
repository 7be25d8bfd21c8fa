package schemas

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
)

// WebhookEvent describes one subscribable webhook event type (spec 6): the
// name a subscription names, what emits it, and the JSON Schema of the
// `data` member of its delivery body (spec 2.6). GET /v1/webhooks/events
// lists the catalogue and the OpenAPI document's `webhooks` section is built
// from it, so a type registered here is documented and subscribable at once.
type WebhookEvent struct {
	// Name is the event type name, upper case with underscores
	// ("CONTACT_CREATED").
	Name string
	// Description says when the event fires, for people.
	Description string
	// Data is the JSON Schema (2020-12, as OpenAPI 3.1 uses) of the
	// delivery's `data` object.
	Data json.RawMessage
}

var (
	webhookMu     sync.RWMutex
	webhookEvents []WebhookEvent
	webhookByName = map[string]int{}
	webhookName   = regexp.MustCompile(`^[A-Z][A-Z0-9_]{1,62}$`)
)

// RegisterWebhookEvent adds an event type to the catalogue. Call it from a
// package's init (the journeys feature registers its types that way). It
// panics on a malformed name, a duplicate name, an empty description or a
// Data that is not a JSON object: a broken catalogue must stop the program
// at start, not surface in a subscription.
func RegisterWebhookEvent(e WebhookEvent) {
	if !webhookName.MatchString(e.Name) {
		panic(fmt.Sprintf("schemas: webhook event name %q: want upper case letters, digits and _", e.Name))
	}
	if e.Description == "" {
		panic("schemas: webhook event " + e.Name + " has no description")
	}
	var probe map[string]any
	if err := json.Unmarshal(e.Data, &probe); err != nil || probe == nil {
		panic(fmt.Sprintf("schemas: webhook event %s: Data is not a JSON Schema object: %v", e.Name, err))
	}
	webhookMu.Lock()
	defer webhookMu.Unlock()
	if _, dup := webhookByName[e.Name]; dup {
		panic("schemas: webhook event " + e.Name + " registered twice")
	}
	webhookByName[e.Name] = len(webhookEvents)
	webhookEvents = append(webhookEvents, e)
}

// WebhookEvents returns every registered event type in registration order.
// The slice is a copy; safe for concurrent use.
func WebhookEvents() []WebhookEvent {
	webhookMu.RLock()
	defer webhookMu.RUnlock()
	return append([]WebhookEvent(nil), webhookEvents...)
}

// LookupWebhookEvent returns the registered event type called name.
func LookupWebhookEvent(name string) (WebhookEvent, bool) {
	webhookMu.RLock()
	defer webhookMu.RUnlock()
	i, ok := webhookByName[name]
	if !ok {
		return WebhookEvent{}, false
	}
	return webhookEvents[i], true
}

// Webhook event names referred to by the envelope type maps
// (ContactWebhookEvents, EventWebhookEvents, TransactionalWebhookEvents).
const (
	// WebhookContactUnsubscribed: the contact's own status became
	// UNSUBSCRIBED (the unsubscribe link of a marketing email).
	WebhookContactUnsubscribed = "CONTACT_UNSUBSCRIBED"
	// WebhookGoalRecorded: a recorded event carried a goalType and matched
	// a contact.
	WebhookGoalRecorded = "GOAL_RECORDED"
	// WebhookTransactionalFailed: a transactional message failed (status
	// failed).
	WebhookTransactionalFailed = "TRANSACTIONAL_FAILED"
)
