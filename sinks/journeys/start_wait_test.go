package journeys_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// relayScope is the wake relay scope of this package's tests' starts.
const relayScope = "timers_sinks_journeys_test"

// TestStartManyBeginsFirstWait: a start with the first wait of the
// journey's current version is stored waiting at step 0 until the wait's
// end (delay: the start time plus its duration; wait_for_event: plus its
// timeout, with the event) as its own timer in the Wait's scope, its
// Execution saying so; a start whose Wait
// names another version (the journey changed since the caller read it),
// or without Wait, is stored not waiting, as Start stores it.
func TestStartManyBeginsFirstWait(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mk := func(src string) (journeys.Journey, *journeys.FirstWait) {
		d := f.def(t, src)
		j, _, err := f.store.Create(ctx, f.ws, d)
		if err != nil {
			t.Fatal(err)
		}
		st, err := d.StepAt("0")
		if err != nil {
			t.Fatal(err)
		}
		return j, &journeys.FirstWait{Version: j.Version, Step: st, Scope: relayScope}
	}
	delay, dw := mk(`{"name":"D","status":"active","reentry":"always","trigger":{"type":"api_event"},"steps":[{"type":"delay","duration":"2h"}]}`)
	wfe, ew := mk(`{"name":"E","status":"active","reentry":"always","trigger":{"type":"api_event"},"steps":[{"type":"wait_for_event","event":"paid","timeout":"3h","onEvent":[],"onTimeout":[]}]}`)
	f.contact(t, "w@example.com", "ACTIVE")
	in := func(j journeys.Journey, w *journeys.FirstWait) journeys.StartInput {
		return journeys.StartInput{Workspace: f.ws, JourneyID: j.ID, Trigger: "api_event", Email: "w@example.com", ExecutionID: schemas.NewID(), Wait: w}
	}
	stale := &journeys.FirstWait{Version: dw.Version + 1, Step: dw.Step, Scope: relayScope}
	ins := []journeys.StartInput{in(delay, dw), in(wfe, ew), in(delay, stale), in(delay, nil)}
	execs, errs := f.startMany(t, ins)
	want := []struct {
		after time.Duration // 0: not waiting
		event string
	}{{2 * time.Hour, ""}, {3 * time.Hour, "paid"}, {0, ""}, {0, ""}}
	for i, w := range want {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		e := execs[i]
		var wake *time.Time
		var event, scope *string
		if err := f.pg.QueryRow(ctx, `SELECT e.next_wake_at, e.wait_event, w.scope FROM journey_executions e
			LEFT JOIN journey_wakes w ON w.execution_id = e.id AND w.due_at = e.next_wake_at AND w.position = e.position
			WHERE e.id = $1 AND e.position = '0' AND e.state = 'active'`, e.ID).
			Scan(&wake, &event, &scope); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if w.after == 0 {
			if wake != nil || event != nil || scope != nil || e.NextWakeAt != nil || e.WaitEvent != "" {
				t.Errorf("start %d: waiting (%v %v; %+v), want not", i, wake, event, e)
			}
			continue
		}
		due := e.StartedAt.Add(w.after)
		if scope == nil || *scope != relayScope || wake == nil || !wake.Equal(due) || e.NextWakeAt == nil || !e.NextWakeAt.Equal(due) || e.WaitEvent != w.event ||
			(w.event == "") != (event == nil) || (event != nil && *event != w.event) {
			t.Errorf("start %d: wake %v event %v scope %v (%+v), want %s %q in %s", i, wake, event, scope, e, due, w.event, relayScope)
		}
		env := journeys.StartWake(e)
		var p schemas.JourneyWake
		if err := json.Unmarshal(env.Payload, &p); err != nil || env.Type != schemas.TypeJourneyWake || p.ExecutionID != e.ID || p.Position != "0" ||
			!p.DueAt.Equal(due) || env.CausationID != schemas.JourneyStartedEnvelopeID(e.ID) {
			t.Errorf("start %d: wake envelope %+v %+v %v", i, env, p, err)
		}
	}
}

// TestWakeRelay: executions started waiting are their own timers. A relay
// round before their wait is due publishes nothing; a round whose publish
// fails commits nothing, so the next round publishes them; each is
// published once (StartWake's envelope), and a round after that finds
// nothing. An execution that ended while waiting (cancelled) or moved on
// another way is not relayed, and its wake-up is deleted with the others;
// one of another scope is left alone.
func TestWakeRelay(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := f.def(t, `{"name":"D","status":"active","reentry":"always","trigger":{"type":"api_event"},"steps":[{"type":"delay","duration":"1h"}]}`)
	j, _, err := f.store.Create(ctx, f.ws, d)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := d.StepAt("0")
	var ins []journeys.StartInput
	for i := range 6 {
		email := fmt.Sprintf("relay%d@example.com", i)
		f.contact(t, email, "ACTIVE")
		scope := relayScope
		if i == 4 {
			scope = relayScope + "_other"
		}
		ins = append(ins, journeys.StartInput{Workspace: f.ws, JourneyID: j.ID, Trigger: "api_event", Email: email,
			ExecutionID: schemas.NewID(), Wait: &journeys.FirstWait{Version: j.Version, Step: st, Scope: scope}})
	}
	execs, errs := f.startMany(t, ins)
	for i := range errs {
		if errs[i] != nil || execs[i].NextWakeAt == nil {
			t.Fatalf("start %d: %v %+v", i, errs[i], execs[i])
		}
	}
	ids := make([]string, len(execs))
	for i, e := range execs {
		ids[i] = e.ID
	}
	t.Cleanup(func() {
		_, _ = f.pg.Exec(context.Background(), `DELETE FROM journey_wakes WHERE execution_id = ANY ($1)`, ids)
	})
	if _, err := f.pg.Exec(ctx, `UPDATE journey_executions SET state = 'cancelled', finished_at = now() WHERE id = $1`, execs[3].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pg.Exec(ctx, `UPDATE journey_executions SET position = '1', next_wake_at = NULL WHERE id = $1`, execs[5].ID); err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) *journeys.Store {
		return journeys.NewStore(f.pg, func() time.Time { return execs[0].StartedAt.Add(d) })
	}
	p := &pipelinetest.Publisher{}
	if _, err := at(59*time.Minute).RelayWakes(ctx, p, relayScope, 100); err != nil || len(p.Of(schemas.TopicJourneys, f.ws)) != 0 {
		t.Fatalf("before due: %d published, %v", len(p.Of(schemas.TopicJourneys, f.ws)), err)
	}
	p.Err = errors.New("broker away")
	if _, err := at(2*time.Hour).RelayWakes(ctx, p, relayScope, 100); err == nil {
		t.Fatal("a failed publish: no error")
	}
	p.Err = nil
	// Claimed: the due ones of the scope, live or not (at least these 5:
	// other tests of the package leave theirs when their workspace goes);
	// then none.
	if n, err := at(2*time.Hour).RelayWakes(ctx, p, relayScope, 1000); err != nil || n < 5 {
		t.Fatalf("%d claimed, %v; want at least 5", n, err)
	}
	if n, err := at(2*time.Hour).RelayWakes(ctx, p, relayScope, 1000); err != nil || n != 0 {
		t.Fatalf("a round after: %d claimed, %v; want none", n, err)
	}
	rows, err := f.pg.Query(ctx, `SELECT execution_id FROM journey_wakes WHERE execution_id = ANY ($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != execs[4].ID {
		t.Errorf("wake-ups left %v, want only the other scope's (%s)", left, execs[4].ID)
	}
	got := p.Of(schemas.TopicJourneys, f.ws)
	if len(got) != 3 {
		t.Fatalf("%d wake-ups published, want 3 (the active ones of the scope)", len(got))
	}
	wants := map[string]schemas.Envelope{}
	for _, e := range execs[:3] {
		w := journeys.StartWake(e)
		wants[w.ID] = w
	}
	for i, env := range got {
		want, ok := wants[env.ID]
		if !ok || string(env.Payload) != string(want.Payload) || env.CausationID != want.CausationID || env.Key != want.Key {
			t.Errorf("wake-up %d: %+v, want one of the active executions' of the scope, once", i, env)
		}
		delete(wants, env.ID)
	}
}
