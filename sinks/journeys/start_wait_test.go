package journeys_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// TestStartManyBeginsFirstWait: a start with the first wait of the
// journey's current version is stored waiting at step 0 until the wait's
// end (delay: the start time plus its duration; wait_for_event: plus its
// timeout, with the event), its Execution saying so; a start whose Wait
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
		return j, &journeys.FirstWait{Version: j.Version, Step: st}
	}
	delay, dw := mk(`{"name":"D","status":"active","reentry":"always","trigger":{"type":"api_event"},"steps":[{"type":"delay","duration":"2h"}]}`)
	wfe, ew := mk(`{"name":"E","status":"active","reentry":"always","trigger":{"type":"api_event"},"steps":[{"type":"wait_for_event","event":"paid","timeout":"3h","onEvent":[],"onTimeout":[]}]}`)
	f.contact(t, "w@example.com", "ACTIVE")
	in := func(j journeys.Journey, w *journeys.FirstWait) journeys.StartInput {
		return journeys.StartInput{Workspace: f.ws, JourneyID: j.ID, Trigger: "api_event", Email: "w@example.com", ExecutionID: schemas.NewID(), Wait: w}
	}
	stale := &journeys.FirstWait{Version: dw.Version + 1, Step: dw.Step}
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
		var event *string
		if err := f.pg.QueryRow(ctx, `SELECT next_wake_at, wait_event FROM journey_executions WHERE id = $1 AND position = '0' AND state = 'active'`, e.ID).
			Scan(&wake, &event); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if w.after == 0 {
			if wake != nil || event != nil || e.NextWakeAt != nil || e.WaitEvent != "" {
				t.Errorf("start %d: waiting (%v %v; %+v), want not", i, wake, event, e)
			}
			continue
		}
		due := e.StartedAt.Add(w.after)
		if wake == nil || !wake.Equal(due) || e.NextWakeAt == nil || !e.NextWakeAt.Equal(due) || e.WaitEvent != w.event ||
			(w.event == "") != (event == nil) || (event != nil && *event != w.event) {
			t.Errorf("start %d: wake %v event %v (%+v), want %s %q", i, wake, event, e, due, w.event)
		}
		env := journeys.StartWake(e)
		var p schemas.JourneyWake
		if err := json.Unmarshal(env.Payload, &p); err != nil || env.Type != schemas.TypeJourneyWake || p.ExecutionID != e.ID || p.Position != "0" ||
			!p.DueAt.Equal(due) || env.CausationID != schemas.JourneyStartedEnvelopeID(e.ID) {
			t.Errorf("start %d: wake envelope %+v %+v %v", i, env, p, err)
		}
	}
}
