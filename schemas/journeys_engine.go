package schemas

import (
	"encoding/json"
	"strings"
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

// TypeJourneyEventWake: a recorded event the execution waits for at a
// wait_for_event step arrived (the matching stage, stages/journeymatch,
// found the execution waiting for the event's name). Payload JourneyWake
// with Event, EventID and ReceivedAt set; key "<workspace>:<contactId>";
// id JourneyEventWakeID, the same on every redelivery of the event. The
// engine decides under the execution's row lock whether the event or the
// timeout ends the wait.
const TypeJourneyEventWake = "journey_execution.event.v1"

// JourneyWake is the payload of TypeJourneyWake and TypeJourneyEventWake.
type JourneyWake struct {
	ExecutionID string    `json:"executionId"`
	Position    string    `json:"position"`       // the step address the execution waits at
	DueAt       time.Time `json:"dueAt,omitzero"` // when the wait ends (UTC); a timer's
	// Event, EventID and ReceivedAt: the event of a TypeJourneyEventWake
	// (its name, the recorded event's id, when it was received).
	Event      string    `json:"event,omitempty"`
	EventID    string    `json:"eventId,omitempty"`
	ReceivedAt time.Time `json:"receivedAt,omitzero"`
}

// JourneyEventWakeID is the id of the event wake-up of execution
// executionID waiting at addr, caused by recorded event eventID.
func JourneyEventWakeID(executionID, addr, eventID string) string {
	return ChildID(executionID+"/"+addr+"@"+eventID, TypeJourneyEventWake, 0)
}

// JourneyEventWakeEnvelope is the event wake-up w of an execution of
// workspace ws whose contact is contactID, caused by envelope causationID.
func JourneyEventWakeEnvelope(ws, contactID, causationID string, w JourneyWake) Envelope {
	return Envelope{ID: JourneyEventWakeID(w.ExecutionID, w.Position, w.EventID), Workspace: ws, Type: TypeJourneyEventWake,
		Key: ws + ":" + contactID, OccurredAt: w.ReceivedAt.UTC(), CausationID: causationID, Payload: mustJSON(w)}
}

// TypeJourneyExecutionCancelled: archiving a journey ended an active
// execution as cancelled. Written to the contacts outbox in the archive's
// transaction, one per execution, and published by the serving process's
// contacts relay; id JourneyCancelledEnvelopeID; key
// "<workspace>:<contactId>". Payload JourneyExecutionCancelled. The
// journey log (stages/journeylog) records it; the engine checks the
// execution left no message stored and unpublished.
const TypeJourneyExecutionCancelled = "journey_execution.cancelled.v1"

// JourneyExecutionCancelled is the payload of TypeJourneyExecutionCancelled.
type JourneyExecutionCancelled struct {
	ExecutionID string    `json:"executionId"`
	JourneyID   string    `json:"journeyId"`
	Version     int       `json:"version"`
	ContactID   string    `json:"contactId"`
	Position    string    `json:"position"` // the step it was at
	At          time.Time `json:"at"`       // when it was cancelled (UTC)
}

// JourneyCancelledEnvelopeID is the id of the cancellation of execution
// id (an execution is cancelled at most once).
func JourneyCancelledEnvelopeID(executionID string) string {
	return ChildID(executionID, TypeJourneyExecutionCancelled, 0)
}

// JourneyCancelledEnvelope is the cancellation c of an execution of
// workspace ws.
func JourneyCancelledEnvelope(ws string, c JourneyExecutionCancelled) Envelope {
	return Envelope{ID: JourneyCancelledEnvelopeID(c.ExecutionID), Workspace: ws, Type: TypeJourneyExecutionCancelled,
		Key: ws + ":" + c.ContactID, OccurredAt: c.At.UTC(), Payload: mustJSON(c)}
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
	StepOutcomeEvent      = "event"      // wait_for_event: the event arrived in time (Detail names it)
	StepOutcomeTimeout    = "timeout"    // wait_for_event: the timeout passed first
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
	// Email is the contact's email as the engine read it for the step
	// ("" when unknown: readers then look it up).
	Email string `json:"email,omitempty"`
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
	return JourneyStepKey(executionID, addr)
}

// JourneyStepKey is the key of the outside effect of step addr of
// execution id ("journey:<execution>:<addr>"): the idempotency key of its
// email, the request id (so the causation id) of the contact events of
// its contact and list steps.
func JourneyStepKey(executionID, addr string) string {
	return "journey:" + executionID + ":" + addr
}

// ParseJourneyStepKey returns the execution of a JourneyStepKey; ok is
// false for any other string.
func ParseJourneyStepKey(key string) (executionID string, ok bool) {
	rest, found := strings.CutPrefix(key, "journey:")
	if !found {
		return "", false
	}
	id, addr, found := strings.Cut(rest, ":")
	if !found || id == "" || addr == "" {
		return "", false
	}
	return id, true
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
		Key: ws + ":" + s.ExecutionID, OccurredAt: s.At.UTC(), CausationID: causationID, Payload: stepDoneJSON(&s)}
}

// stepDoneJSON is s encoded as json.Marshal encodes it; like mustJSON it
// panics on what cannot be encoded (a time past year 9999).
func stepDoneJSON(s *JourneyStepDone) json.RawMessage {
	b, err := AppendJourneyStepDone(make([]byte, 0, 384), s)
	if err != nil {
		panic("schemas: " + err.Error())
	}
	return b
}
