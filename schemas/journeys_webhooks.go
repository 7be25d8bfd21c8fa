package schemas

import (
	"encoding/json"
	"time"
)

// Journey webhook events (issue 26 item 5): an execution started, ran out
// of steps, or converted (an exitOn event or goal). They travel on
// TopicWebhooks, key "<workspace>:<contactId>", and the fan-out of that
// topic maps them to public names through EventWebhookEvents. Each id is
// derived from the execution id (JourneyWebhookID): an execution starts,
// completes and converts at most once, so every copy of one of them is one
// message to receivers. Payload JourneyWebhookData.
const (
	// TypeWebhookJourneyStarted: an execution started (the trigger
	// endpoint, an event, a website event or a list join), announced from
	// its journey_execution.started.v1. JOURNEY_STARTED.
	TypeWebhookJourneyStarted = "webhook.journey_started.v1"
	// TypeWebhookJourneyCompleted: an execution ran out of steps (state
	// completed; an exit step or a conversion is not a completion).
	// JOURNEY_COMPLETED.
	TypeWebhookJourneyCompleted = "webhook.journey_completed.v1"
	// TypeWebhookJourneyConverted: an exitOn event or goal ended a running
	// execution as a conversion. JOURNEY_CONVERTED.
	TypeWebhookJourneyConverted = "webhook.journey_converted.v1"
)

// Public names of the journey webhook events.
const (
	WebhookJourneyStarted   = "JOURNEY_STARTED"
	WebhookJourneyCompleted = "JOURNEY_COMPLETED"
	WebhookJourneyConverted = "JOURNEY_CONVERTED"
)

// JourneyWebhookData is the `data` of the journey webhook events. Trigger
// is set for JOURNEY_STARTED; EventID, Event, GoalType, Value and Currency
// for JOURNEY_CONVERTED (the event or goal that converted).
type JourneyWebhookData struct {
	JourneyID   string      `json:"journeyId"`
	JourneyName string      `json:"journeyName"`
	ExecutionID string      `json:"executionId"`
	Version     int         `json:"version"`
	ContactID   string      `json:"contactId"`
	Email       string      `json:"email"`
	Trigger     string      `json:"trigger,omitempty"`
	EventID     string      `json:"eventId,omitempty"`
	Event       string      `json:"event,omitempty"`
	GoalType    string      `json:"goalType,omitempty"`
	Value       json.Number `json:"value,omitempty"`
	Currency    string      `json:"currency,omitempty"`
	OccurredAt  time.Time   `json:"occurredAt"`
}

// JourneyWebhookID is the envelope id of journey webhook type typ of
// execution id: the same on every replay.
func JourneyWebhookID(executionID, typ string) string {
	return ChildID(executionID, typ, 0)
}

// JourneyWebhookEnvelope is the journey webhook envelope of type typ for
// d in workspace ws, caused by causationID.
func JourneyWebhookEnvelope(ws, typ, causationID string, d JourneyWebhookData) Envelope {
	d.OccurredAt = d.OccurredAt.UTC()
	return Envelope{ID: JourneyWebhookID(d.ExecutionID, typ), Workspace: ws, Type: typ, Key: ws + ":" + d.ContactID,
		OccurredAt: d.OccurredAt, CausationID: causationID, Payload: mustJSON(d)}
}

// journeyWebhookEvents are the catalogue entries of the journey webhook
// events, registered with the built-in ones.
func journeyWebhookEvents() []WebhookEvent {
	base := []string{
		`"journeyId":{"type":"string","description":"The journey's id."}`,
		`"journeyName":{"type":"string","description":"The journey's name."}`,
		`"executionId":{"type":"string","description":"The execution's id, as admin journey executions lists it."}`,
		`"version":{"type":"integer","description":"The journey version the execution runs."}`,
		whContactID, whEmail,
	}
	req := []string{"journeyId", "journeyName", "executionId", "version", "contactId", "email", "occurredAt"}
	return []WebhookEvent{
		{Name: WebhookJourneyStarted, Description: "A journey execution started for a contact: by POST /api/public/journeys/trigger (api_event), a recorded event (event), an event from /public/events (website_event) or a list join (list_joined). One per execution.",
			Data: whObject(append(req, "trigger"), with(base,
				`"trigger":{"type":"string","enum":["api_event","event","website_event","list_joined"],"description":"What started it: the journey's trigger type."}`,
				`"occurredAt":{"type":"string","format":"date-time","description":"When the execution started (ISO 8601, UTC)."}`)...)},
		{Name: WebhookJourneyCompleted, Description: "A journey execution ran out of steps (state completed). An exit step, a conversion or archiving the journey is not a completion.",
			Data: whObject(req, with(base,
				`"occurredAt":{"type":"string","format":"date-time","description":"When the last step finished (ISO 8601, UTC)."}`)...)},
		{Name: WebhookJourneyConverted, Description: "An event or goal named by the journey's exitOn was recorded for the contact and ended the running execution as a conversion; value is the goal's value, counted in the journey's revenue. One per execution.",
			Data: whObject(append(req, "eventId", "event"), with(base,
				`"eventId":{"type":"string","description":"The id of the event that converted (the id POST /v1/events answered with)."}`,
				`"event":{"type":"string","description":"The event's name."}`,
				`"goalType":{"type":"string","enum":["purchase","subscription","lead","signup","booking","trial","other"]}`,
				`"value":{"type":"number","description":"The goal's value; negative for a refund."}`,
				`"currency":{"type":"string","description":"ISO 4217 code, upper case."}`,
				`"occurredAt":{"type":"string","format":"date-time","description":"When the event that converted happened (its occurredAt: ISO 8601, UTC)."}`)...)},
	}
}
