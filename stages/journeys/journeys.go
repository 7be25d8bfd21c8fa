// Package journeys is the journey execution engine (issue 26 item 4): the
// stage that runs executions. It reads schemas.TopicJourneys: the started
// announcement of an execution (journey_execution.started.v1, from the
// trigger endpoint or matching) and its own wake-ups
// (journey_execution.wake.v1, published by durable timers, sinks/timers,
// or, for an execution the trigger endpoint started waiting, by the wake
// relay this stage runs, sinks/journeys RelayWakes).
// For either it runs the execution's steps from its position until a wait
// or the end:
//
//   - delay and wait_until store when the wait ends (next_wake_at) and a
//     timer that publishes the wake-up then, in one transaction;
//   - branch evaluates its condition (conditions.go) and enters an arm;
//   - send_email goes through the transactional path (pipeline.Mailer,
//     ingest/transactional's, passed in by the root wiring) with the
//     idempotency key schemas.JourneySendExternalID(execution, step): a
//     step run again after a crash claims the same message, which the
//     delivery stage sends once; suppression is decided when the step
//     runs, so a contact who unsubscribed, bounced or complained while
//     waiting gets no later marketing email;
//   - update_contact, add_to_list and remove_from_list go through the
//     contacts store (pipeline.ContactWriter, ingest/contacts'), whose
//     events are written to the contacts outbox with the change;
//   - exit ends the execution; running out of steps completes it.
//
// Exactly once: each step runs in its own transaction holding the
// execution's row lock; the step's record (journey_step_runs, unique per
// execution and step), the position change and the timer commit together.
// A redelivered envelope finds the steps it ran and returns their outputs
// again (the runner may have died before publishing them): their step-done
// envelopes, and the transactional send envelope of a message still
// queued.
//
// A paused journey holds its executions: they look again every
// HoldRecheck and go on once it is active. Archiving cancels them (the
// store does it); the engine then finds them not active and stops, after
// publishing what a step cut short had stored (events.go, leftover).
//
// wait_for_event waits for its event or its timeout, whichever the engine
// sees first under the execution's row lock (events.go): the matching
// stage wakes executions waiting for a recorded event's name.
package journeys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
	"sendstream/sinks/postgres"
	"sendstream/sinks/timers"
)

// Name is the stage's registered name.
const Name = "journeys"

// DefaultHoldRecheck is how often an execution of a paused journey looks
// whether the journey is active again.
const DefaultHoldRecheck = time.Minute

func init() {
	pipeline.Register(pipeline.Spec[struct{}]{
		Name:     Name,
		Consumes: schemas.TopicJourneys,
		Produces: []string{schemas.TopicJourneySteps, schemas.TopicTransactional, schemas.TopicContacts},
		Route:    Route,
		// Executions of different contacts run at once; one contact's in
		// order (the envelopes' key is the workspace and contact). A
		// handler mostly waits for its shared statements (its reads,
		// known steps and waits go in batches with the others'): the
		// more run at once, the larger and cheaper the batches, and 64
		// capped a process at about 64 envelopes per batch round trip.
		Concurrency: 256,
		New: func(ctx context.Context, r pipeline.Resources, _ struct{}) (pipeline.Stage, error) {
			if r.Postgres == nil || r.Publisher == nil {
				return nil, fmt.Errorf("%s: needs Postgres and a Publisher (timers)", Name)
			}
			// One clock for waits, stamps and timers (r.Clock: tests only).
			clock := r.ClockOrSystem()
			t, err := timers.Shared(ctx, r.Postgres, r.Publisher, timers.Config{
				Queue: timers.QueueFor(r.Settings["topic_prefix"]), Logger: r.Logger, Clock: r.Clock})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", Name, err)
			}
			store := journeys.NewStore(r.Postgres, clock.Now)
			// Executions the trigger endpoint started waiting are their
			// own timers: this process relays their wake-ups when due.
			stopRelay := store.StartWakeRelay(context.WithoutCancel(ctx), r.Publisher, journeys.WakeRelayConfig{
				Scope: timers.QueueFor(r.Settings["topic_prefix"]), Logger: r.Logger})
			release := func() error {
				stopRelay()
				return timers.Release()
			}
			return New(Options{Store: store, Postgres: r.Postgres, Timers: t,
				Mailer: r.Mailer, Contacts: r.Contacts, Now: clock.Now, Logger: r.Logger, release: release}), nil
		},
	})
}

// Route sends transactional send envelopes to the transactional topic,
// contact events (update_contact and list steps) to the contacts topic and
// step-done envelopes to the journey steps topic.
func Route(out schemas.Envelope) string {
	switch {
	case out.Type == schemas.TypeTransactionalSend:
		return schemas.TopicTransactional
	case strings.HasPrefix(out.Type, "contact."):
		return schemas.TopicContacts
	}
	return schemas.TopicJourneySteps
}

// Scheduler stores a timer that publishes env to topic at at, within tx
// (sinks/timers.Timers).
type Scheduler interface {
	Schedule(ctx context.Context, tx pgx.Tx, topic string, env schemas.Envelope, at time.Time) error
}

// Options are what the stage runs on.
type Options struct {
	Store    *journeys.Store
	Postgres *pgxpool.Pool
	Timers   Scheduler
	// Mailer sends send_email steps; nil fails them (retried until the
	// process has one).
	Mailer pipeline.Mailer
	// Contacts runs update_contact, add_to_list and remove_from_list;
	// nil fails them (retried until the process has one).
	Contacts    pipeline.ContactWriter
	Now         func() time.Time // nil: time.Now
	HoldRecheck time.Duration    // 0: DefaultHoldRecheck
	Logger      *slog.Logger
	release     func() error // gives back shared timers on Close
}

// Stage runs journey executions. Handle is safe for concurrent use.
type Stage struct {
	o        Options
	mu       sync.Mutex
	versions map[versionKey]*schemas.JourneyDefinition // immutable, so cached
	// Concurrent handlers' first reads and known steps share round trips.
	peeks    *postgres.Batcher[journeys.RunKey, journeys.Peeked]
	advances *postgres.Batcher[journeys.Advance, journeys.Advanced]
	waits    *postgres.Batcher[waitStart, bool] // executions entering waits (waitbatch.go)
}

// batchWorkers is how many shared statements of each kind (reads, known
// steps, waits) are in flight at once. One: a batch fills while the one
// before it runs, so fewer, larger batches and fewer commits waiting for
// WAL flushes (most of what busy backends waited for, sampled in the
// timers benchmark). Alternating pairs of BENCH_JOURNEY_TIMERS=20000
// measured 4 → 2 at 938 → 702 and 1,062 → 997 µs of machine CPU per step,
// and 2 → 1 at 862 → 703 and 886 → 784 µs.
const batchWorkers = 1

type versionKey struct {
	journey string
	version int
}

var (
	_ pipeline.Stage  = (*Stage)(nil)
	_ pipeline.Closer = (*Stage)(nil)
)

// New returns the stage over o.
func New(o Options) *Stage {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HoldRecheck <= 0 {
		o.HoldRecheck = DefaultHoldRecheck
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Stage{o: o, versions: map[versionKey]*schemas.JourneyDefinition{},
		peeks:    &postgres.Batcher[journeys.RunKey, journeys.Peeked]{Workers: batchWorkers, Run: o.Store.PeekRuns},
		advances: &postgres.Batcher[journeys.Advance, journeys.Advanced]{Workers: batchWorkers, Run: o.Store.AdvanceAll}}
	s.waits = &postgres.Batcher[waitStart, bool]{Workers: batchWorkers, Run: s.waitAll}
	return s
}

// Close stops the shared statements and gives back the process's shared
// timers.
func (s *Stage) Close() error {
	s.peeks.Close()
	s.advances.Close()
	s.waits.Close()
	if s.o.release != nil {
		return s.o.release()
	}
	return nil
}

// Handle runs the execution env names (see the package comment). It
// returns the outputs of the steps env ran before (a redelivery) and of
// the steps it runs now.
func (s *Stage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	var execID string
	var wake *schemas.JourneyWake
	switch env.Type {
	case schemas.TypeJourneyExecutionStarted:
		// Only these two members decide; the rest (the trigger's data
		// among them) is read with the execution.
		var p struct {
			ExecutionID string     `json:"executionId"`
			NextWakeAt  *time.Time `json:"nextWakeAt"`
		}
		if err := json.Unmarshal(env.Payload, &p); err != nil || p.ExecutionID == "" {
			return nil, pipeline.Permanent(fmt.Errorf("journey started %s: bad payload: %v", env.ID, err))
		}
		if p.NextWakeAt != nil {
			// Stored waiting at its first step with its timer (the
			// trigger's start): only that timer moves it on, and a start
			// runs no step, so there is nothing to replay.
			return nil, nil
		}
		execID = p.ExecutionID
	case schemas.TypeJourneyWake, schemas.TypeJourneyEventWake:
		var p schemas.JourneyWake
		if err := json.Unmarshal(env.Payload, &p); err != nil || p.ExecutionID == "" ||
			(env.Type == schemas.TypeJourneyEventWake) != (p.Event != "") {
			return nil, pipeline.Permanent(fmt.Errorf("journey wake %s: bad payload: %v", env.ID, err))
		}
		execID, wake = p.ExecutionID, &p
	case schemas.TypeJourneyExecutionCancelled:
		var p schemas.JourneyExecutionCancelled
		if err := json.Unmarshal(env.Payload, &p); err != nil || p.ExecutionID == "" {
			return nil, pipeline.Permanent(fmt.Errorf("journey cancelled %s: bad payload: %v", env.ID, err))
		}
		execID = p.ExecutionID // only leftover (events.go) can come of it
	default:
		return nil, nil // not the engine's
	}
	// One read: the execution, and whether env ran steps before (only a
	// redelivery replays their outputs).
	p, err := s.peeks.Do(ctx, journeys.RunKey{ID: execID, CauseID: env.ID})
	if err == nil {
		err = p.Err
	}
	if errors.Is(err, journeys.ErrNotFound) {
		return nil, nil // gone with its contact or journey
	}
	if err != nil {
		return nil, fmt.Errorf("journey execution %s: %w", execID, err)
	}
	seen := p.Run
	var out []schemas.Envelope
	if p.Ran {
		if out, err = s.replay(ctx, env, execID); err != nil {
			return nil, err
		}
	}
	cur := &seen
	for {
		res, next, more, err := s.step(ctx, env, execID, wake, cur)
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
		if !more {
			return out, nil
		}
		cur = next
	}
}

// definition returns version v of journey id.
func (s *Stage) definition(ctx context.Context, id string, v int) (*schemas.JourneyDefinition, error) {
	k := versionKey{id, v}
	s.mu.Lock()
	d := s.versions[k]
	s.mu.Unlock()
	if d != nil {
		return d, nil
	}
	def, err := s.o.Store.Version(ctx, id, v)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.versions) > 10000 {
		clear(s.versions)
	}
	s.versions[k] = &def
	s.mu.Unlock()
	return &def, nil
}

// stepResult is what one step decided, to be committed.
type stepResult struct {
	outcome, messageID, detail string
	arm                        string // branch or wait_for_event: the arm to enter; "" for Next
	exit                       bool
	publish                    []schemas.Envelope
}

// step runs the step the execution is at. It reads the execution first
// without a lock and runs a step with an outside effect (send_email, the
// contact and list steps) before its transaction: those calls take pool
// connections of their own, and a transaction holding one while waiting
// for another deadlocks a busy pool. The effects are idempotent by the
// step's key, so running one again (the execution moved meanwhile, or a
// crash before the commit) repeats nothing. The transaction then locks the
// execution, checks it is still where it was read, and commits the step's
// record, the move and any timer together. more reports that the next
// step may run at once.
//
// known, when not nil, is the execution as read or as the previous step of
// this handling left it (that step committed its position: reading it
// again would find the same); nil reads it. next is the execution as this
// step left it when more, nil when it must be read again.
func (s *Stage) step(ctx context.Context, env schemas.Envelope, execID string, wake *schemas.JourneyWake, known *journeys.Run) (out []schemas.Envelope, next *journeys.Run, more bool, err error) {
	var seen journeys.Run
	if known != nil {
		seen = *known
	} else if seen, err = s.o.Store.PeekRun(ctx, execID); errors.Is(err, journeys.ErrNotFound) {
		return nil, nil, false, nil // gone with its contact or journey
	} else if err != nil {
		return nil, nil, false, fmt.Errorf("journey execution %s: %w", execID, err)
	}
	if seen.State != journeys.StateActive || seen.JourneyStatus == schemas.JourneyArchived {
		out, err := s.leftover(ctx, seen)
		return out, nil, false, err
	}
	if wake == nil && seen.NextWakeAt != nil {
		// Waiting, and env is no wake-up (a start that began waiting with
		// its timer, sinks/journeys StartMany; a redelivered start): only
		// the wait's timer or event moves it on, as the lock below would
		// find.
		return nil, nil, false, nil
	}
	def, err := s.definition(ctx, seen.JourneyID, seen.Version)
	if err != nil {
		return nil, nil, false, fmt.Errorf("journey execution %s: %w", execID, err)
	}
	st, err := def.StepAt(seen.Position)
	if err != nil {
		return nil, nil, false, pipeline.Permanent(fmt.Errorf("execution %s: %w", execID, err))
	}
	if wake != nil {
		out, next, ok, err := s.wakeAndRun(ctx, env, seen, def, st, wake)
		if err != nil {
			return nil, nil, false, fmt.Errorf("journey execution %s: %w", execID, err)
		}
		if ok {
			return out, next, next != nil, nil // more unless it ended
		}
		if out != nil {
			// Not as read: what the effect stored is published anyway (as
			// below), and the execution is read again (more, next nil).
			return out, nil, true, nil
		}
	}
	var effect *stepResult
	if seen.JourneyStatus == schemas.JourneyActive && seen.NextWakeAt == nil && hasEffect(st.Type) {
		r, err := s.effect(ctx, seen, st)
		if err != nil {
			return nil, nil, false, fmt.Errorf("journey execution %s: %w", execID, err)
		}
		effect = &r
	}
	if res, ok := s.known(seen, st, wake, effect); ok {
		out, next, done, err := s.advance(ctx, env, seen, def, st, res)
		if err != nil {
			return nil, nil, false, fmt.Errorf("journey execution %s: %w", execID, err)
		}
		if done {
			return out, next, next != nil, nil
		}
		// Not as read (moved, paused, ended, or its wait not over): the
		// general path below locks and looks.
	}
	if seen.JourneyStatus == schemas.JourneyActive && seen.NextWakeAt == nil && effect == nil && isWait(st.Type) && sharedWait(st) {
		ok, err := s.beginWait(ctx, env, seen, st)
		if err != nil {
			return nil, nil, false, fmt.Errorf("journey execution %s: %w", execID, err)
		}
		if ok {
			return nil, nil, false, nil
		}
		// Not as read: the general path below locks and looks.
	}
	moved := false
	err = pgx.BeginFunc(ctx, s.o.Postgres, func(tx pgx.Tx) error {
		out, next, more, moved = nil, nil, false, false
		run, err := s.o.Store.LockRun(ctx, tx, execID)
		if errors.Is(err, journeys.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if run.State != journeys.StateActive || run.JourneyStatus == schemas.JourneyArchived {
			return nil // ended meanwhile (archived, converted): an effect run above is still published below
		}
		if run.Position != seen.Position || (run.NextWakeAt == nil) != (seen.NextWakeAt == nil) ||
			run.JourneyStatus != seen.JourneyStatus {
			moved = true // changed since it was read: read again
			return nil
		}
		now := s.o.Now().UTC()
		if run.JourneyStatus != schemas.JourneyActive { // paused: hold, look again later
			if wake != nil && wake.Event != "" { // an event wake-up: hold it
				return s.holdEvent(ctx, tx, env, *wake, now.Add(s.o.HoldRecheck))
			}
			return s.schedule(ctx, tx, env, run, schemas.ChildID(env.ID, schemas.TypeJourneyWake, 1), now.Add(s.o.HoldRecheck))
		}
		var res stepResult
		switch {
		case run.NextWakeAt != nil: // waiting at a wait step
			if wake == nil || wake.Position != run.Position {
				return nil // not this wait's wake-up
			}
			if wake.Event != "" { // the event or nothing (events.go)
				r, ok := eventEnds(run, st, wake)
				if !ok {
					return nil
				}
				res = r
				break
			}
			if now.Before(*run.NextWakeAt) { // early (clocks differ): wait again
				return s.schedule(ctx, tx, env, run, schemas.ChildID(env.ID, schemas.TypeJourneyWake, 2), *run.NextWakeAt)
			}
			res = stepResult{outcome: schemas.StepOutcomeDone}
			if st.Type == schemas.StepWaitForEvent {
				res = stepResult{outcome: schemas.StepOutcomeTimeout, arm: schemas.ArmOnTimeout}
			}
		case isWait(st.Type):
			due, err := s.waitEnd(ctx, tx, run, st, now)
			if err != nil {
				return err
			}
			waitFor := ""
			if st.Type == schemas.StepWaitForEvent {
				waitFor = st.Event // the matching stage finds the execution by it
			}
			if err := s.o.Store.Wait(ctx, tx, run.ID, run.Position, due, waitFor); err != nil {
				return err
			}
			id := schemas.ChildID(run.ID+"/"+run.Position, schemas.TypeJourneyWake, 0)
			return s.schedule(ctx, tx, env, run, id, due)
		case effect != nil:
			res = *effect
		default:
			if res, err = s.decide(ctx, tx, run, st, now); err != nil {
				return err
			}
		}
		out, next, err = s.finishStep(ctx, tx, env, run, def, st, res, now)
		more = next != nil
		return err
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("journey execution %s: %w", execID, err)
	}
	if effect != nil && !recorded(out) {
		// The effect ran but the step was not recorded here: the
		// execution ended (archived, converted), moved or was paused
		// meanwhile. What the effect stored is published anyway (a
		// message left queued and unpublished would stay so forever; the
		// same envelope ids, so a second copy changes nothing).
		out = append(effect.publish, out...)
	}
	if moved {
		return out, nil, true, nil
	}
	return out, next, more, nil
}

// hasEffect reports whether steps of type t act outside the execution
// (they run before the step's transaction).
func hasEffect(t string) bool {
	switch t {
	case schemas.StepSendEmail, schemas.StepUpdateContact, schemas.StepAddToList, schemas.StepRemoveFromList:
		return true
	}
	return false
}

// isWait reports whether steps of type t wait for a timer.
func isWait(t string) bool {
	return t == schemas.StepDelay || t == schemas.StepWaitUntil || t == schemas.StepWaitForEvent
}

// schedule stores the wake-up id of run's position due at due, in tx.
func (s *Stage) schedule(ctx context.Context, tx pgx.Tx, env schemas.Envelope, run journeys.Run, id string, due time.Time) error {
	return s.o.Timers.Schedule(ctx, tx, schemas.TopicJourneys, wakeEnvelope(env, run, id, due), due)
}

// decide runs a step without an outside effect that does not wait, within
// tx.
func (s *Stage) decide(ctx context.Context, tx pgx.Tx, run journeys.Run, st *schemas.JourneyStep, now time.Time) (stepResult, error) {
	switch st.Type {
	case schemas.StepBranch:
		ok, err := (&evaluator{store: s.o.Store, q: tx, run: run, now: now}).eval(ctx, st.If)
		if err != nil {
			return stepResult{}, err
		}
		if ok {
			return stepResult{outcome: schemas.StepOutcomeThen, arm: schemas.ArmThen}, nil
		}
		return stepResult{outcome: schemas.StepOutcomeElse, arm: schemas.ArmElse}, nil
	case schemas.StepExit:
		return stepResult{outcome: schemas.StepOutcomeExited, exit: true}, nil
	}
	return stepResult{outcome: schemas.StepOutcomeSkipped, detail: st.Type + " is not run by the engine yet"}, nil
}
