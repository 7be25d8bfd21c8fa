package journeys

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// wait_for_event, and what an execution that ended under a step leaves.
//
// An execution entering a wait_for_event step stores its timeout as
// next_wake_at, a timer for it, and the event's name (wait_event), all in
// the step's transaction. The matching stage, reading every recorded
// event, finds the contact's executions waiting for its name and publishes
// a journey_execution.event.v1 wake-up for each. Whichever of the two
// wake-ups the engine handles first under the execution's row lock ends
// the wait: the event takes onEvent, the timer onTimeout, and the position
// moves past the step in the same transaction, so the other (or any
// redelivery) finds the execution no longer waiting there and does
// nothing. An event received at or after the wait's end does nothing
// either, even when its wake-up comes first: the timeout had passed.

// eventEnds returns the step result of event wake-up w for run, waiting
// at step st: ok when st is a wait_for_event for w's event, received
// before the wait ends.
func eventEnds(run journeys.Run, st *schemas.JourneyStep, w *schemas.JourneyWake) (stepResult, bool) {
	if st.Type != schemas.StepWaitForEvent || st.Event != w.Event || run.NextWakeAt == nil ||
		!w.ReceivedAt.Before(*run.NextWakeAt) {
		return stepResult{}, false
	}
	return stepResult{outcome: schemas.StepOutcomeEvent, arm: schemas.ArmOnEvent,
		detail: fmt.Sprintf("event %s (%s)", w.Event, w.EventID)}, true
}

// holdEvent stores, in tx, event wake-up w (env) again for at: its
// journey is paused, and the event counts once it is active again if it
// was received before the wait's end.
func (s *Stage) holdEvent(ctx context.Context, tx pgx.Tx, env schemas.Envelope, w schemas.JourneyWake, at time.Time) error {
	held := schemas.Envelope{ID: schemas.ChildID(env.ID, schemas.TypeJourneyEventWake, 1), Workspace: env.Workspace,
		Type: schemas.TypeJourneyEventWake, Key: env.Key, OccurredAt: w.ReceivedAt.UTC(), CausationID: env.ID,
		Traceparent: env.Traceparent, Payload: env.Payload}
	return s.o.Timers.Schedule(ctx, tx, schemas.TopicJourneys, held, at)
}

// recorded reports whether out holds a step-done envelope (the handling
// recorded the step it ran).
func recorded(out []schemas.Envelope) bool {
	for _, e := range out {
		if e.Type == schemas.TypeJourneyStepDone {
			return true
		}
	}
	return false
}

// leftover returns the send envelope of a message that run's current
// send_email step stored but nobody published, when run ended under that
// step (archived or converted): the step stored its message, then the
// process died before the step's transaction, and the execution ended
// before the envelope came again. Such an execution is still at the step
// (the engine moves past a step in the transaction that records it), and
// a message the transactional path stored under the step's key proves the
// step ran its send: asking the Mailer again with the same request answers
// that message and republishes it while it is still queued (delivery sends
// it once). No message: nothing (the step never sent, and never will).
// Any envelope of the execution, its cancellation included, does this.
func (s *Stage) leftover(ctx context.Context, run journeys.Run) ([]schemas.Envelope, error) {
	if run.State != journeys.StateCancelled && run.State != journeys.StateConverted {
		return nil, nil
	}
	def, err := s.definition(ctx, run.JourneyID, run.Version)
	if err != nil {
		return nil, fmt.Errorf("journey execution %s: %w", run.ID, err)
	}
	st, err := def.StepAt(run.Position)
	if err != nil || st.Type != schemas.StepSendEmail {
		return nil, nil
	}
	status, err := s.o.Store.MessageStatus(ctx, schemas.MessageIDOf(run.Workspace, schemas.JourneySendExternalID(run.ID, run.Position)))
	if err != nil || status != schemas.MessageQueued {
		return nil, err
	}
	res, err := s.mail(ctx, run, st, run.Position)
	if err != nil {
		return nil, fmt.Errorf("journey execution %s: %w", run.ID, err)
	}
	return res.Publish, nil
}
