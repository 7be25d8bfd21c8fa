package journeys_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// startScope is the wake relay scope of the starts below.
const startScope = "timers_stages_journeys_test"

// TestStartedWaitingMatchesTheEngine: an execution the trigger's start put
// into its first delay as its own timer (StartMany with Wait: a journey_wakes
// row, no timer job) is, for the engine and for what admin journey
// executions and stats show, the execution the engine would have moved
// into that delay itself: its started announcement (and a redelivery of
// it, with or without the wake-up it carries) runs and schedules nothing
// and changes no row, and the wake-up the wake relay publishes once the
// delay is over runs the next steps as the engine-made wait's does.
func TestStartedWaitingMatchesTheEngine(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	old, early := f.journey(t, waitThenSend), f.journey(t, waitThenSend)
	// The engine's way: started not waiting, the engine enters the delay.
	oldStarted := f.start(t, old, `{}`)
	if out := f.handle(t, oldStarted); len(out) != 0 {
		t.Fatalf("engine entering the delay: %d outputs", len(out))
	}
	oldWake, _ := f.sched.last(t)
	// The start's way.
	seq++
	email := schemas.NewID() + "@example.test"
	if _, err := f.pg.Exec(ctx, `INSERT INTO contacts (id, workspace_id, seq, email, status) VALUES ($1, $2, $3, $4, 'ACTIVE')`,
		schemas.NewID(), f.ws, seq, email); err != nil {
		t.Fatal(err)
	}
	def, err := f.store.Version(ctx, early, 1)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := def.StepAt("0")
	var e journeys.Execution
	err = pgx.BeginFunc(ctx, f.pg, func(tx pgx.Tx) error {
		execs, errs, err := f.store.StartMany(ctx, tx, []journeys.StartInput{{Workspace: f.ws, JourneyID: early, Trigger: schemas.TriggerAPIEvent,
			Email: email, ExecutionID: schemas.NewID(), Data: json.RawMessage(`{}`), Wait: &journeys.FirstWait{Version: 1, Step: st, Scope: startScope}}})
		if err != nil || errs[0] != nil {
			t.Fatalf("StartMany: %v %v", err, errs)
		}
		e = execs[0]
		return nil
	})
	if err != nil || e.NextWakeAt == nil {
		t.Fatalf("start waiting: %v %+v", err, e)
	}
	started := journeys.StartedEnvelope(e, "test")
	var p schemas.JourneyExecutionStarted
	if err := json.Unmarshal(started.Payload, &p); err != nil || p.NextWakeAt == nil || !p.NextWakeAt.Equal(*e.NextWakeAt) {
		t.Fatalf("started announcement %s: %v, want its next wake-up", started.Payload, err)
	}
	// The same announcement without the wake-up (as published before it
	// was carried): the engine reads the execution and finds it waiting.
	unmarked := e
	unmarked.NextWakeAt = nil
	plain := journeys.StartedEnvelope(unmarked, "test")
	updated := func() time.Time {
		var u time.Time
		if err := f.pg.QueryRow(ctx, `SELECT updated_at FROM journey_executions WHERE id = $1`, e.ID).Scan(&u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	before, scheduled := updated(), f.sched.count()
	f.clock.set(f.clock.now().Add(time.Minute)) // a change now would show in updated_at
	for _, env := range []schemas.Envelope{started, started, plain, plain} {
		if out := f.handle(t, env); len(out) != 0 {
			t.Errorf("started announcement of a waiting execution: %d outputs", len(out))
		}
	}
	if after := updated(); !after.Equal(before) || f.sched.count() != scheduled {
		t.Errorf("started announcement of a waiting execution: updated %s -> %s, %d timers scheduled", before, after, f.sched.count()-scheduled)
	}
	var timerCount int
	var scope *string
	if err := f.pg.QueryRow(ctx, `SELECT (SELECT count(*) FROM river_job WHERE args->>'envelope' LIKE '%' || $1 || '%'), w.scope
		FROM journey_executions e LEFT JOIN journey_wakes w ON w.execution_id = e.id AND w.due_at = e.next_wake_at AND w.position = e.position
		WHERE e.id = $1`, e.ID).Scan(&timerCount, &scope); err != nil || timerCount != 0 || scope == nil || *scope != startScope {
		t.Errorf("waiting execution: %d timer jobs, wake scope %v (%v); want none, and its own timer in %s", timerCount, scope, err, startScope)
	}
	// What admin journey executions and stats show: the same.
	show := func(j string) (journeys.ExecutionRow, journeys.Stats) {
		rows, err := f.store.Executions(ctx, f.ws, j, "", 10)
		if err != nil || len(rows) != 1 {
			t.Fatalf("executions of %s: %v %v", j, rows, err)
		}
		s, err := f.store.Stats(ctx, f.ws, j)
		if err != nil {
			t.Fatal(err)
		}
		r := rows[0]
		r.ID, r.ContactID, r.Email = "", "", ""
		return r, s
	}
	oldRow, oldStats := show(old)
	row, stats := show(early)
	if !reflect.DeepEqual(oldRow, row) || !reflect.DeepEqual(oldStats, stats) {
		t.Errorf("admin view: engine's wait %+v %+v, start's %+v %+v", oldRow, oldStats, row, stats)
	}
	// The wake-ups run the same steps: the relay publishes the start's
	// once the delay is over (on the store's clock), once.
	rel := &pipelinetest.Publisher{}
	if _, err := f.store.RelayWakes(ctx, rel, startScope, 1000); err != nil || len(rel.Of(schemas.TopicJourneys, f.ws)) != 0 {
		t.Fatalf("relay before the delay's end: %d wake-ups, %v", len(rel.Of(schemas.TopicJourneys, f.ws)), err)
	}
	f.clock.set(f.clock.now().Add(time.Hour))
	for range 2 {
		if _, err := f.store.RelayWakes(ctx, rel, startScope, 1000); err != nil {
			t.Fatal(err)
		}
	}
	var wake *schemas.Envelope
	if relayed := rel.Of(schemas.TopicJourneys, f.ws); len(relayed) > 1 {
		t.Fatalf("relay published the wake-up %d times", len(relayed))
	} else if len(relayed) == 1 {
		wake = &relayed[0]
	}
	if want := journeys.StartWake(e); wake == nil || wake.ID != want.ID || string(wake.Payload) != string(want.Payload) ||
		wake.CausationID != want.CausationID || wake.Key != want.Key {
		t.Fatalf("relayed wake-up %+v, want %+v", wake, want)
	}
	a, b := steps(t, f.handle(t, oldWake)), steps(t, f.handle(t, *wake))
	if !reflect.DeepEqual(a, b) || len(b) != 2 {
		t.Errorf("after the delay: engine's wait ran %v, start's %v", a, b)
	}
	oldRow, oldStats = show(old)
	row, stats = show(early)
	if !reflect.DeepEqual(oldRow, row) || !reflect.DeepEqual(oldStats, stats) || row.State != journeys.StateCompleted {
		t.Errorf("admin view after: engine's wait %+v %+v, start's %+v %+v", oldRow, oldStats, row, stats)
	}
}
