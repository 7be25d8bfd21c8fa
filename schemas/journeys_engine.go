package schemas

import (
	"encoding/json"
	"time"
)

// The journey execution engine (stages/journeys) runs executions from
// TopicJourneys: the started announcement, then its own wake-ups, which it
// schedules as durable timers (sinks/timers) that publish a
// TypeJourneyWake envelope to TopicJourneys when due. It returns one
// TypeJourneyStepDone envelope per step it finished, on TopicJourneySteps,
// for the analytics and webhook stages to come.

// TopicJourneySteps carries the steps journey executions finished
// (TypeJourneyStepDone), keyed "<workspace>:<executionId>".
const TopicJourneySteps = "sendstream.journeysteps.v1"

// TypeJourneyWake: a timer of an execution fired (a delay or wait_until
// ran out, or a held execution of a paused journey looks again). Payload
// JourneyWake; key "<workspace>:<contactId>", as the started announcement.
const TypeJourneyWake = "journey_execution.wake.v1"

// JourneyWake is the payload of TypeJourneyWake.
type JourneyWake struct {
	ExecutionID string    `json:"executionId"`
	Position    string    `json:"position"` // the step address the execution waits at
	DueAt       time.Time `json:"dueAt"`    // when the wait ends (UTC)
}

// TypeJourneyStepDone: an execution finished a step. Payload
// JourneyStepDone; the id is JourneyStepEnvelopeID, the same on every
// replay.
const TypeJourneyStepDone = "journey_step.done.v1"

// Outcomes of a finished step (JourneyStepDone.Outcome).
const (
	StepOutcomeDone       = "done"       // update_contact, add_to_list, remove_from_list, a wait that ended
	StepOutcomeSent       = "sent"       // send_email accepted for delivery (MessageID set)
	StepOutcomeSuppressed = "suppressed" // send_email refused: suppressed, unsubscribed, no policy… (Detail says why)
	StepOutcomeThen       = "then"       // branch: the condition held
	StepOutcomeElse       = "else"       // branch: it did not
	StepOutcomeExited     = "exited"     // exit
	StepOutcomeSkipped    = "skipped"    // a step this engine does not run yet (Detail says which)
)

// JourneyStepDone is the payload of TypeJourneyStepDone.
type JourneyStepDone struct {
	ExecutionID string    `json:"executionId"`
	JourneyID   string    `json:"journeyId"`
	Version     int       `json:"version"`
	ContactID   string    `json:"contactId"`
	Step        string    `json:"step"`     // the step's address
	StepType    string    `json:"stepType"` // a Step… type
	Outcome     string    `json:"outcome"`  // a StepOutcome…
	MessageID   string    `json:"messageId,omitempty"`
	Detail      string    `json:"detail,omitempty"`
	At          time.Time `json:"at"`
	// Final is the execution's final state when this step ended it
	// (completed, exited), "" while it goes on.
	Final string `json:"final,omitempty"`
}

// JourneyStepEnvelopeID is the id of the step-done envelope of step addr
// of execution id (a step runs at most once per execution).
func JourneyStepEnvelopeID(executionID, addr string) string {
	return ChildID(executionID+"/"+addr, TypeJourneyStepDone, 0)
}

// JourneySendExternalID is the transactional externalId (idempotency key)
// of the email of send_email step addr of execution id: a step retried
// after a crash claims the same message and never sends twice.
func JourneySendExternalID(executionID, addr string) string {
	return "journey:" + executionID + ":" + addr
}

// MailRequest is an email a stage asks the transactional path to send, as
// POST /v1/transactional/send would with these fields (pipeline.Mailer).
type MailRequest struct {
	Workspace  string
	To         string
	TemplateID string
	SendPolicy string          // key or id; "" the workspace's default policy
	Subject    string          // Liquid; "" keeps the template's
	Data       json.RawMessage // the Liquid data object; nil for none
	ExternalID string          // the idempotency key
}

// MailResult is what the transactional path decided about a MailRequest.
type MailResult struct {
	MessageID    string // "" when refused
	Deduplicated bool   // the ExternalID named a message accepted before
	Status       string // the message's status (queued for a new one)
	// RefusedCode and Refused say why nothing was accepted (the send
	// endpoint's error code and message: RECIPIENT_SUPPRESSED, …).
	RefusedCode, Refused string
	// Publish are the envelopes to publish to TopicTransactional: the new
	// message's, or again a queued one's on a repeat (same id; delivery
	// sends once).
	Publish []Envelope
}

// mustJSON encodes v, which cannot fail for the engine's payload types.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("schemas: encode " + err.Error())
	}
	return b
}

// JourneyWakeEnvelope is the wake-up envelope of w for workspace ws and
// key, with id id.
func JourneyWakeEnvelope(id, ws, key, causationID string, w JourneyWake) Envelope {
	return Envelope{ID: id, Workspace: ws, Type: TypeJourneyWake, Key: key, OccurredAt: w.DueAt.UTC(),
		CausationID: causationID, Payload: mustJSON(w)}
}

// JourneyStepEnvelope is the step-done envelope of s in workspace ws.
func JourneyStepEnvelope(ws, causationID string, s JourneyStepDone) Envelope {
	return Envelope{ID: JourneyStepEnvelopeID(s.ExecutionID, s.Step), Workspace: ws, Type: TypeJourneyStepDone,
		Key: ws + ":" + s.ExecutionID, OccurredAt: s.At.UTC(), CausationID: causationID, Payload: mustJSON(s)}
}
