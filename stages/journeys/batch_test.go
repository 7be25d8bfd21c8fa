package journeys_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

const waitThenSend = `{"name":"S","status":"active","reentry":"always","trigger":{"type":"api_event"},
	"steps":[{"type":"delay","duration":"1h"},{"type":"send_email","templateId":"TPL"}]}`

// TestConcurrentWakeUpsShareStatements: wake-ups handled at once share the
// engine's statements (its reads and the steps known before their lock go
// in shared round trips). Each execution of an active journey runs its
// delay and its send once and completes (its re-entry guard released),
// with one Mailer request under its step's key; a redelivered wake-up
// returns the same outputs and sends nothing more; executions of a paused
// journey handled in the same rounds are held where they were.
func TestConcurrentWakeUpsShareStatements(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	active, paused := f.journey(t, waitThenSend), f.journey(t, waitThenSend)
	t0 := f.clock.now()
	const n, held = 48, 8
	type exec struct {
		started, wake schemas.Envelope
		id            string
		held          bool
	}
	var execs []exec
	for i := range n + held {
		j := active
		if i >= n {
			j = paused
		}
		started := f.start(t, j, `{}`)
		f.handle(t, started)
		wake, _ := f.sched.last(t)
		var p schemas.JourneyExecutionStarted
		_ = json.Unmarshal(started.Payload, &p)
		execs = append(execs, exec{started: started, wake: wake, id: p.ExecutionID, held: i >= n})
	}
	if _, err := f.store.SetStatus(ctx, f.ws, paused, schemas.JourneyPaused); err != nil {
		t.Fatal(err)
	}
	f.clock.set(t0.Add(time.Hour))
	outs := make([][]string, len(execs))
	var wg sync.WaitGroup
	for round := range 2 { // the second round: every wake-up redelivered
		for i, e := range execs {
			wg.Go(func() {
				out, err := f.stage.Handle(ctx, e.wake)
				if err != nil {
					t.Errorf("handle %s: %v", e.id, err)
					return
				}
				got := fmt.Sprint(steps(t, out))
				if round == 0 {
					outs[i] = []string{got}
				} else {
					outs[i] = append(outs[i], got)
				}
			})
		}
		wg.Wait()
	}
	for i, e := range execs {
		want := "[0:done: 1:sent:completed]"
		wantState, wantPos := "completed", "1"
		if e.held {
			want, wantState, wantPos = "[]", "active", "0"
		}
		if outs[i][0] != want || outs[i][1] != want {
			t.Errorf("execution %d (held %v): outputs %v, then redelivered %v, want %s both times", i, e.held, outs[i][0], outs[i][1], want)
		}
		if st, pos, _ := f.state(t, e.started); st != wantState || pos != wantPos {
			t.Errorf("execution %d (held %v): %s at %s, want %s at %s", i, e.held, st, pos, wantState, wantPos)
		}
	}
	f.mail.mu.Lock()
	keys := append([]string(nil), f.mail.keys...)
	f.mail.mu.Unlock()
	sort.Strings(keys)
	if len(keys) != 2*n { // the first handling and the redelivery's replay ask for the same message
		t.Fatalf("%d Mailer requests, want %d (one per execution, again on redelivery)", len(keys), 2*n)
	}
	for i := 0; i < len(keys); i += 2 {
		if keys[i] != keys[i+1] {
			t.Fatalf("Mailer keys %s and %s: want each execution's key twice", keys[i], keys[i+1])
		}
	}
	var running int64
	if err := f.pg.QueryRow(ctx, `SELECT coalesce(sum(running), 0) FROM journey_entries WHERE journey_id = $1`, active).Scan(&running); err != nil {
		t.Fatal(err)
	}
	if running != 0 {
		t.Errorf("%d executions of the active journey still counted running", running)
	}
	var runs int64
	if err := f.pg.QueryRow(ctx, `SELECT count(*) FROM journey_step_runs r JOIN journey_executions e ON e.id = r.execution_id
		WHERE e.journey_id = ANY($1)`, []string{active, paused}).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	if runs != 2*n {
		t.Errorf("%d step runs recorded, want %d", runs, 2*n)
	}
}

// TestOneContactsExecutionsEndTogether: several executions of one contact
// on an always journey wake and complete at once (their steps share
// statements): each completes, and the contact's re-entry guard counts
// none running afterwards (each ending released it once).
func TestOneContactsExecutionsEndTogether(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	j := f.journey(t, waitThenSend)
	first := f.start(t, j, `{}`)
	var p schemas.JourneyExecutionStarted
	_ = json.Unmarshal(first.Payload, &p)
	started := []schemas.Envelope{first}
	for range 5 {
		var env schemas.Envelope
		if err := pgx.BeginFunc(ctx, f.pg, func(tx pgx.Tx) error {
			e, err := f.store.Start(ctx, tx, journeys.StartInput{Workspace: f.ws, JourneyID: j, Trigger: schemas.TriggerAPIEvent,
				Email: p.Email, ExecutionID: schemas.NewID(), Data: json.RawMessage(`{}`)})
			env = journeys.StartedEnvelope(e, "test")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		started = append(started, env)
	}
	var wakes []schemas.Envelope
	for _, env := range started {
		f.handle(t, env)
		w, _ := f.sched.last(t)
		wakes = append(wakes, w)
	}
	f.clock.set(f.clock.now().Add(time.Hour))
	var wg sync.WaitGroup
	for _, w := range wakes {
		wg.Go(func() {
			if _, err := f.stage.Handle(ctx, w); err != nil {
				t.Errorf("handle %s: %v", w.ID, err)
			}
		})
	}
	wg.Wait()
	for i, env := range started {
		if st, _, _ := f.state(t, env); st != "completed" {
			t.Errorf("execution %d: %s, want completed", i, st)
		}
	}
	var entries, running int64
	if err := f.pg.QueryRow(ctx, `SELECT entries, running FROM journey_entries WHERE journey_id = $1`, j).Scan(&entries, &running); err != nil {
		t.Fatal(err)
	}
	if entries != int64(len(started)) || running != 0 {
		t.Errorf("guard: %d entries, %d running; want %d entries, none running", entries, running, len(started))
	}
}
