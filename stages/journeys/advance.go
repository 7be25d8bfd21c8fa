package journeys

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// Recording a finished step and moving the execution on: in the step's
// transaction after LockRun (finishStep), or, when the step's result is
// known before the lock, in one statement that locks, records and moves
// (advance, journeys.Store.AdvanceAll): the same row lock, record and move
// committed together, in one statement instead of five, which concurrent
// handlers' steps share a round trip for (postgres.Batcher).

// known returns the result of step st of seen when it does not depend on
// what the lock finds: an effect that ran (seen not waiting), or the timer
// wake-up of the wait seen is at (whether the wait is over is checked
// under the lock). ok is false for the rest (the general path).
func (s *Stage) known(seen journeys.Run, st *schemas.JourneyStep, wake *schemas.JourneyWake, effect *stepResult) (res stepResult, ok bool) {
	switch {
	case seen.JourneyStatus != schemas.JourneyActive:
		return stepResult{}, false
	case effect != nil:
		return *effect, true
	case seen.NextWakeAt != nil && wake != nil && wake.Event == "" && wake.Position == seen.Position && isWait(st.Type):
		if st.Type == schemas.StepWaitForEvent {
			return stepResult{outcome: schemas.StepOutcomeTimeout, arm: schemas.ArmOnTimeout}, true
		}
		return stepResult{outcome: schemas.StepOutcomeDone}, true
	}
	return stepResult{}, false
}

// advance records step st of seen with result res and moves it on in one
// statement, if seen is still as read (active, at st, its journey active,
// waiting for a wait now over or not waiting). done is false when it was
// not: nothing was written, and the general path takes over. next is
// the execution as the step left it (nil: ended).
func (s *Stage) advance(ctx context.Context, env schemas.Envelope, seen journeys.Run, def *schemas.JourneyDefinition, st *schemas.JourneyStep, res stepResult) (out []schemas.Envelope, next *journeys.Run, done bool, err error) {
	now := s.o.Now().UTC()
	pos, final, err := target(def, seen.Position, res)
	if err != nil {
		return nil, nil, false, err
	}
	r := stepRunOf(env, seen, st, res, final, now)
	a, err := s.advances.Do(ctx, journeys.Advance{Step: r, WakeEnded: seen.NextWakeAt != nil, Next: pos})
	if err != nil || !a.Locked {
		return nil, nil, false, err
	}
	if !a.Recorded { // the row lock makes this impossible, as in finishStep
		return nil, nil, false, fmt.Errorf("step %s of execution %s is recorded but the execution is still at it", seen.Position, seen.ID)
	}
	return append(res.publish, stepEnvelope(r)), after(seen, pos, final), true, nil
}

// wakeAndRun handles the timer wake-up of a wait that is over when the
// step it leads to has an outside effect (a delay, then a send_email):
// the effect runs first, then one shared statement (AdvanceAll with Then)
// locks the execution, records the wait's step and the effect's step and
// moves it past both, instead of one statement per step. ok is false when
// the wake-up is not such a one (nothing ran), or when the execution was
// not as read (the effect ran but nothing was recorded: out holds what it
// stored, to publish anyway, and the caller reads the execution again).
func (s *Stage) wakeAndRun(ctx context.Context, env schemas.Envelope, seen journeys.Run, def *schemas.JourneyDefinition, st *schemas.JourneyStep, wake *schemas.JourneyWake) (out []schemas.Envelope, next *journeys.Run, ok bool, err error) {
	now := s.o.Now().UTC()
	if seen.NextWakeAt == nil || seen.NextWakeAt.After(now) {
		return nil, nil, false, nil // not waiting, or early: the general path reschedules
	}
	res, known := s.known(seen, st, wake, nil)
	if !known {
		return nil, nil, false, nil
	}
	pos, final, err := target(def, seen.Position, res)
	if err != nil || final != "" {
		return nil, nil, false, err
	}
	nst, err := def.StepAt(pos)
	if err != nil || !hasEffect(nst.Type) {
		return nil, nil, false, nil // the general path reports a bad position
	}
	at := *after(seen, pos, "")
	eff, err := s.effect(ctx, at, nst)
	if err != nil {
		return nil, nil, false, err
	}
	pos2, final2, err := target(def, pos, eff)
	if err != nil {
		return nil, nil, false, err
	}
	r1, r2 := stepRunOf(env, seen, st, res, "", now), stepRunOf(env, at, nst, eff, final2, now)
	stay := pos2
	if final2 != "" {
		stay = pos // an ended execution stays at its last step, as finishStep leaves it
	}
	a, err := s.advances.Do(ctx, journeys.Advance{Step: r1, Then: &r2, WakeEnded: true, Next: stay})
	if err != nil {
		return nil, nil, false, err
	}
	if !a.Locked {
		return eff.publish, nil, false, nil
	}
	if !a.Recorded { // the row lock makes this impossible, as in finishStep
		return nil, nil, false, fmt.Errorf("step %s of execution %s is recorded but the execution is still at it", seen.Position, seen.ID)
	}
	out = append(append([]schemas.Envelope{stepEnvelope(r1)}, eff.publish...), stepEnvelope(r2))
	return out, after(at, pos2, final2), true, nil
}

// finishStep records the step, moves the execution on (or ends it) within
// tx and returns the step's outputs and the execution as it left it (nil:
// ended).
func (s *Stage) finishStep(ctx context.Context, tx pgx.Tx, env schemas.Envelope, run journeys.Run, def *schemas.JourneyDefinition, st *schemas.JourneyStep, res stepResult, now time.Time) ([]schemas.Envelope, *journeys.Run, error) {
	pos, final, err := target(def, run.Position, res)
	if err != nil {
		return nil, nil, err
	}
	r := stepRunOf(env, run, st, res, final, now)
	ok, err := s.o.Store.RecordStep(ctx, tx, r)
	if err != nil {
		return nil, nil, err
	}
	if !ok { // recorded by another run that then did not move on: impossible under the row lock
		return nil, nil, fmt.Errorf("step %s of execution %s is recorded but the execution is still at it", run.Position, run.ID)
	}
	if final != "" {
		if _, err := s.o.Store.Finish(ctx, tx, run.Workspace, run.ID, final, nil); err != nil {
			return nil, nil, err
		}
	} else if err := s.o.Store.Move(ctx, tx, run.ID, pos, nil); err != nil {
		return nil, nil, err
	}
	return append(res.publish, stepEnvelope(r)), after(run, pos, final), nil
}

// target is where result res of the step at pos takes the execution: the
// next position, or the final state when it ends.
func target(def *schemas.JourneyDefinition, pos string, res stepResult) (next, final string, err error) {
	var done bool
	switch {
	case res.exit:
		return "", journeys.StateExited, nil
	case res.arm != "":
		next, done, err = def.Enter(pos, res.arm)
	default:
		next, done, err = def.Next(pos)
	}
	if err != nil {
		return "", "", pipeline.Permanent(err)
	}
	if done {
		return "", journeys.StateCompleted, nil
	}
	return next, "", nil
}

// stepRunOf is the record of step st of run, finished with res by env at
// now (final: the state it ended the execution in, "" when it goes on).
func stepRunOf(env schemas.Envelope, run journeys.Run, st *schemas.JourneyStep, res stepResult, final string, now time.Time) journeys.StepRun {
	return journeys.StepRun{ExecutionID: run.ID, Address: run.Position, StepType: st.Type, Outcome: res.outcome,
		MessageID: res.messageID, Detail: res.detail, Final: final, CauseID: env.ID, DoneAt: now,
		Workspace: run.Workspace, JourneyID: run.JourneyID, Version: run.Version, ContactID: run.ContactID, Email: run.Email}
}

// after is run as a committed step left it: at pos, waiting for nothing;
// nil when the step ended it.
func after(run journeys.Run, pos, final string) *journeys.Run {
	if final != "" {
		return nil
	}
	run.Position, run.NextWakeAt = pos, nil
	return &run
}
