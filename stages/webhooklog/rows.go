package webhooklog

import (
	"fmt"
	"time"

	"sendstream/schemas"
)

// This file turns envelopes into rows of webhook_attempts and
// webhook_messages.

// AttemptRow is one webhook_attempts row: one delivery attempt.
type AttemptRow struct {
	EventID, Workspace, TargetKind, TargetID, URL string
	Event, MessageID                              string
	Attempt                                       uint32
	Outcome                                       string
	StatusCode                                    uint16
	DurationMs                                    float64
	Error                                         string
	NextAttemptAt, At                             time.Time // NextAttemptAt: Unix 0 when none
	Replay                                        bool
	Received                                      time.Time
}

// MessageRow is one webhook_messages row: the body of a message for one
// target, and the attempt number of the delivery envelope it came from.
type MessageRow struct {
	EventID, Workspace, TargetID, MessageID, TargetKind string
	URL, Event                                          string
	FirstAt                                             time.Time
	Attempt                                             uint32
	Body                                                string
	Received                                            time.Time
}

// DecodeAttempt turns a webhook.attempt.v1 envelope into its row.
func DecodeAttempt(env schemas.Envelope, now time.Time) (AttemptRow, error) {
	p, err := schemas.DecodeWebhookAttempt(env.Payload)
	if err != nil {
		return AttemptRow{}, fmt.Errorf("webhooklog: envelope %s: %w", env.ID, err)
	}
	r := AttemptRow{EventID: env.ID, Workspace: env.Workspace, TargetKind: p.TargetKind, TargetID: p.TargetID, URL: p.URL,
		Event: p.Event, MessageID: p.MessageID, Outcome: p.Outcome, DurationMs: p.DurationMs, Error: p.Error,
		NextAttemptAt: time.Unix(0, 0).UTC(), At: p.At.UTC(), Replay: p.Replay, Received: now.UTC()}
	if p.MessageID == "" || p.TargetID == "" {
		return r, fmt.Errorf("webhooklog: envelope %s: no message or target id", env.ID)
	}
	if p.Attempt < 0 || p.Attempt > 1<<31 || p.StatusCode < 0 || p.StatusCode > 999 {
		return r, fmt.Errorf("webhooklog: envelope %s: attempt %d or status %d out of range", env.ID, p.Attempt, p.StatusCode)
	}
	r.Attempt, r.StatusCode = uint32(p.Attempt), uint16(p.StatusCode)
	if p.NextAttemptAt != nil {
		r.NextAttemptAt = p.NextAttemptAt.UTC()
	}
	if err := inRange(env.ID, r.At, r.NextAttemptAt); err != nil {
		return r, err
	}
	return r, nil
}

// DecodeDelivery turns a webhook.delivery.v1 envelope into its
// webhook_messages row. A delivery without FirstAt is filed under the
// envelope's time.
func DecodeDelivery(env schemas.Envelope, now time.Time) (MessageRow, error) {
	p, err := schemas.DecodeWebhookDelivery(env.Payload)
	if err != nil {
		return MessageRow{}, fmt.Errorf("webhooklog: envelope %s: %w", env.ID, err)
	}
	r := MessageRow{EventID: env.ID, Workspace: env.Workspace, TargetID: p.TargetID, MessageID: p.MessageID,
		TargetKind: p.TargetKind, URL: p.URL, Event: p.Event, FirstAt: p.FirstAt.UTC(), Body: string(p.Body), Received: now.UTC()}
	if r.FirstAt.IsZero() {
		r.FirstAt = env.OccurredAt.UTC()
	}
	if p.MessageID == "" || p.TargetID == "" || len(p.Body) == 0 {
		return r, fmt.Errorf("webhooklog: envelope %s: no message id, target id or body", env.ID)
	}
	if p.Attempt < 0 || p.Attempt > 1<<31 {
		return r, fmt.Errorf("webhooklog: envelope %s: attempt %d out of range", env.ID, p.Attempt)
	}
	r.Attempt = uint32(p.Attempt)
	return r, inRange(env.ID, r.FirstAt)
}

// inRange checks that times fit a ClickHouse DateTime (Unix seconds in
// 32 bits, unsigned).
func inRange(id string, ts ...time.Time) error {
	for _, t := range ts {
		if t.Unix() < 0 || t.Unix() >= 1<<32 {
			return fmt.Errorf("webhooklog: envelope %s: time %s out of range", id, t)
		}
	}
	return nil
}
