package schemas

import (
	"encoding/json"
	"time"
)

// TopicJourneys carries journey executions to the execution engine (issue
// 26): TypeJourneyExecutionStarted now; the engine's own step envelopes
// later. Key "<workspace>:<contactId>", so one contact's executions stay in
// order.
const TopicJourneys = "sendstream.journeys.v1"

// TypeJourneyExecutionStarted: an execution was created in Postgres (table
// journey_executions) at its first step. It is written to the contacts
// outbox in the transaction that creates the execution (the trigger
// endpoint), or returned by the matching stage that created it, so it is
// published at least once; the envelope id is derived from the execution id
// (JourneyStartedEnvelopeID), so consumers deduplicate by env.ID. Payload
// JourneyExecutionStarted.
const TypeJourneyExecutionStarted = "journey_execution.started.v1"

// JourneyExecutionStarted is the payload of TypeJourneyExecutionStarted:
// what the engine needs to run the execution without reading the request.
type JourneyExecutionStarted struct {
	ExecutionID string    `json:"executionId"`
	JourneyID   string    `json:"journeyId"`
	Version     int       `json:"version"`
	ContactID   string    `json:"contactId"`
	Email       string    `json:"email"`
	Trigger     string    `json:"trigger"`            // a Trigger… type
	Position    string    `json:"position"`           // the first step's address
	StartedAt   time.Time `json:"startedAt"`          // UTC
	SourceID    string    `json:"sourceId,omitempty"` // the event or membership that started it; "" for the API
	// Data is the trigger call's data (api_event) or the event's properties,
	// kept for Liquid in the journey's emails; null when none.
	Data json.RawMessage `json:"data"`
	// NextWakeAt is set when the execution was stored already waiting at
	// its first step (a wait) until then, its timer committed with it:
	// the engine has nothing to do for the announcement.
	NextWakeAt *time.Time `json:"nextWakeAt,omitempty"`
}

// JourneyStartedEnvelopeID is the envelope id of the started announcement
// of execution id: the same on every publish of it.
func JourneyStartedEnvelopeID(executionID string) string {
	return ChildID(executionID, TypeJourneyExecutionStarted, 0)
}
