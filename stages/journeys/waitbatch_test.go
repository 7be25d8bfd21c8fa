package journeys_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"sendstream/schemas"
	engine "sendstream/stages/journeys"
)

// TestConcurrentStartsShareWaitTransactions: started envelopes handled at
// once, each delivered twice at the same time, enter their delay in shared
// transactions with the real timers (one statement for the moves, one for
// the timers). Each execution of the active journey waits until its delay
// ends with exactly one timer due then; executions of a journey paused
// before they were handled do not enter the wait and get no wait timer; a
// later redelivery changes nothing.
func TestConcurrentStartsShareWaitTransactions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	stage := engine.New(engine.Options{Store: f.store, Postgres: f.pg, Timers: f.sched.inner, Mailer: f.mail, Now: f.clock.now})
	t.Cleanup(func() { _ = stage.Close() })
	active, paused := f.journey(t, waitThenSend), f.journey(t, waitThenSend)
	const n, held = 40, 8
	var started []schemas.Envelope
	for i := range n + held {
		j := active
		if i >= n {
			j = paused
		}
		started = append(started, f.start(t, j, `{}`))
	}
	if _, err := f.store.SetStatus(ctx, f.ws, paused, schemas.JourneyPaused); err != nil {
		t.Fatal(err)
	}
	due := f.clock.now().Add(time.Hour).UTC()
	handleAll := func(copies int) {
		var wg sync.WaitGroup
		for _, env := range started {
			for range copies {
				wg.Go(func() {
					out, err := stage.Handle(ctx, env)
					if err != nil {
						t.Errorf("handle %s: %v", env.ID, err)
					} else if len(out) != 0 {
						t.Errorf("handle %s: %d outputs, want none (entering a wait publishes nothing)", env.ID, len(out))
					}
				})
			}
		}
		wg.Wait()
	}
	check := func(when string) {
		for i, env := range started {
			var p schemas.JourneyExecutionStarted
			_ = json.Unmarshal(env.Payload, &p)
			var state, pos string
			var wake *time.Time
			if err := f.pg.QueryRow(ctx, `SELECT state, position, next_wake_at FROM journey_executions WHERE id = $1`, p.ExecutionID).
				Scan(&state, &pos, &wake); err != nil {
				t.Fatal(err)
			}
			var timers int
			var at *time.Time
			wakeID := schemas.ChildID(p.ExecutionID+"/0", schemas.TypeJourneyWake, 0)
			if err := f.pg.QueryRow(ctx, `SELECT count(*), min(scheduled_at) FROM river_job WHERE args->>'envelopeId' = $1`, wakeID).
				Scan(&timers, &at); err != nil {
				t.Fatal(err)
			}
			if i >= n {
				if state != "active" || pos != "0" || wake != nil || timers != 0 {
					t.Errorf("%s: held execution %d: %s at %s waiting %v with %d wait timers, want active at 0 not waiting, none", when, i, state, pos, wake != nil, timers)
				}
				continue
			}
			if state != "active" || pos != "0" || wake == nil || !wake.Equal(due) {
				t.Errorf("%s: execution %d: %s at %s waking at %v, want active at 0 waking at %s", when, i, state, pos, wake, due)
			}
			if timers != 1 || at == nil || !at.Equal(due) {
				t.Errorf("%s: execution %d: %d timers (first due %v), want one due at %s", when, i, timers, at, due)
			}
		}
	}
	handleAll(2)
	check("handled twice at once")
	f.clock.set(f.clock.now().Add(time.Minute))
	handleAll(1)
	check("redelivered a minute later")
}
