package journeys

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/schemas"
	"sendstream/sinks/journeys"
	"sendstream/sinks/timers"
)

// Shared wait transactions: an execution entering a wait whose end needs
// nothing read under its lock (delay, wait_for_event, wait_until in UTC)
// is moved into it with the waits of concurrent handlers in one
// transaction: one statement locks and moves them all
// (journeys.Store.WaitAll, with LockRun's checks), one statement stores
// their timers, one commit. Each execution's move and timer still commit
// together; one whose execution is not as read (moved, paused, ended)
// goes the general way, which locks and looks.

// ManyScheduler stores many timers in one statement within tx
// (sinks/timers.Timers). A Scheduler without it has a shared
// transaction's timers stored one by one.
type ManyScheduler interface {
	ScheduleMany(ctx context.Context, tx pgx.Tx, ts []timers.Timer) error
}

// waitStart is one execution entering its wait, and its timer.
type waitStart struct {
	wait  journeys.WaitStart
	timer timers.Timer
}

// sharedWait reports whether step st of seen (a wait, seen active and
// waiting for nothing, its journey active) can begin in a shared
// transaction: its end needs no read under the lock.
func sharedWait(st *schemas.JourneyStep) bool {
	switch st.Type {
	case schemas.StepDelay, schemas.StepWaitForEvent:
		return true
	case schemas.StepWaitUntil:
		return st.TimeZone != schemas.TimeZoneContact
	}
	return false
}

// beginWait moves seen into the wait of step st and stores its wake-up,
// in a transaction shared with concurrent handlers' waits. ok is false
// when seen was not as read: nothing was written, the general path
// takes over.
func (s *Stage) beginWait(ctx context.Context, env schemas.Envelope, seen journeys.Run, st *schemas.JourneyStep) (ok bool, err error) {
	due, err := s.waitEnd(ctx, nil, seen, st, s.o.Now().UTC())
	if err != nil {
		return false, err
	}
	waitFor := ""
	if st.Type == schemas.StepWaitForEvent {
		waitFor = st.Event // the matching stage finds the execution by it
	}
	id := schemas.ChildID(seen.ID+"/"+seen.Position, schemas.TypeJourneyWake, 0)
	w := waitStart{wait: journeys.WaitStart{ExecutionID: seen.ID, Position: seen.Position, Until: due, Event: waitFor},
		timer: timers.Timer{Topic: schemas.TopicJourneys, Env: wakeEnvelope(env, seen, id, due), At: due}}
	return s.waits.Do(ctx, w)
}

// waitAll is one shared wait transaction (the waits Batcher's Run). Of
// several starts of one execution only the first goes in; the others
// answer false and take the general path.
func (s *Stage) waitAll(ctx context.Context, in []waitStart) ([]bool, error) {
	out := make([]bool, len(in))
	idx := make([]int, 0, len(in))
	ws := make([]journeys.WaitStart, 0, len(in))
	seen := make(map[string]bool, len(in))
	for i, w := range in {
		if seen[w.wait.ExecutionID] {
			continue
		}
		seen[w.wait.ExecutionID] = true
		idx, ws = append(idx, i), append(ws, w.wait)
	}
	err := pgx.BeginFunc(ctx, s.o.Postgres, func(tx pgx.Tx) error {
		clear(out)
		moved, err := s.o.Store.WaitAll(ctx, tx, ws)
		if err != nil {
			return err
		}
		var ts []timers.Timer
		for k, m := range moved {
			if m {
				out[idx[k]] = true
				ts = append(ts, in[idx[k]].timer)
			}
		}
		if ms, ok := s.o.Timers.(ManyScheduler); ok {
			return ms.ScheduleMany(ctx, tx, ts)
		}
		for _, t := range ts {
			if err := s.o.Timers.Schedule(ctx, tx, t.Topic, t.Env, t.At); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("begin %d waits: %w", len(ws), err)
	}
	return out, nil
}

// wakeEnvelope is wake-up id of run's position due at due, caused by env.
func wakeEnvelope(env schemas.Envelope, run journeys.Run, id string, due time.Time) schemas.Envelope {
	w := schemas.JourneyWake{ExecutionID: run.ID, Position: run.Position, DueAt: due.UTC()}
	wenv := schemas.JourneyWakeEnvelope(id, run.Workspace, run.Workspace+":"+run.ContactID, env.ID, w)
	wenv.Traceparent = env.Traceparent
	return wenv
}
