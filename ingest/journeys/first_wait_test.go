package journeys_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	sj "sendstream/sinks/journeys"
)

// testScope is the wake relay scope of the tests' starts: no process
// relays it but the test below, by hand.
const testScope = "timers_ingest_journeys_test"

// TestTriggerStartsInFirstWait: a trigger on a journey whose first step is
// a delay answers once the execution is stored waiting at that step as its
// own timer (a journey_wakes row of the relay's scope); a journey beginning with
// another step starts not waiting and with none (the engine runs it).
// Once the delay is over, one wake relay round publishes each waiting
// execution's wake-up (the engine's envelope, due at the delay's end,
// caused by the started announcement) and clears its scope; the next
// round publishes nothing more.
func TestTriggerStartsInFirstWait(t *testing.T) {
	e := start(t, ingesttest.WorkspaceOpts{})
	ctx := context.Background()
	_, tk := e.journey(t, e.ws, apiJourney("active", "always")) // delay 1h
	_, xk := e.journey(t, e.ws, `{"name":"X","status":"active","reentry":"always","trigger":{"type":"api_event"},"steps":[{"type":"exit"}]}`)
	e.contact(t, "wait@example.com", "ACTIVE")
	due := map[string]time.Time{} // waiting execution → its wake time
	contact := ""
	for _, c := range []struct {
		key     string
		waiting bool
	}{{tk, true}, {xk, false}, {tk, true}} {
		st, b := e.trigger(t, e.key, c.key, map[string]any{"email": "wait@example.com"})
		var o outcome
		if err := json.Unmarshal(b, &o); err != nil || st != 200 {
			t.Fatalf("trigger: %d %s", st, b)
		}
		contact = o.ContactID
		var started time.Time
		var wake *time.Time
		var scope *string
		if err := e.h.PG.QueryRow(ctx, `SELECT e.started_at, e.next_wake_at, w.scope FROM journey_executions e
			LEFT JOIN journey_wakes w ON w.execution_id = e.id AND w.due_at = e.next_wake_at AND w.position = e.position
			WHERE e.id = $1 AND e.position = '0' AND e.state = 'active'`,
			o.ExecutionID).Scan(&started, &wake, &scope); err != nil {
			t.Fatal(err)
		}
		if !c.waiting {
			if wake != nil || scope != nil {
				t.Errorf("exit journey: wake %v, scope %v", wake, scope)
			}
			continue
		}
		if wake == nil || !wake.Equal(started.Add(time.Hour)) || scope == nil || *scope != testScope {
			t.Fatalf("delay journey: started %s, wake %v, scope %v", started, wake, scope)
		}
		due[o.ExecutionID] = *wake
	}
	pub := &pipelinetest.Publisher{}
	early := sj.NewStore(e.h.PG, func() time.Time { return time.Now().Add(50 * time.Minute) })
	if _, err := early.RelayWakes(ctx, pub, testScope, 1000); err != nil {
		t.Fatal(err)
	}
	if got := pub.Of(schemas.TopicJourneys, e.ws); len(got) != 0 {
		t.Fatalf("before the delay's end the relay published %d wake-ups", len(got))
	}
	later := sj.NewStore(e.h.PG, func() time.Time { return time.Now().Add(2 * time.Hour) })
	for range 2 { // the second round finds nothing left
		if _, err := later.RelayWakes(ctx, pub, testScope, 1000); err != nil {
			t.Fatal(err)
		}
	}
	got := pub.Of(schemas.TopicJourneys, e.ws)
	if len(got) != len(due) {
		t.Fatalf("%d wake-ups published, want one per waiting execution (%d)", len(got), len(due))
	}
	for _, env := range got {
		var p schemas.JourneyWake
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			t.Fatal(err)
		}
		at, ok := due[p.ExecutionID]
		if !ok || env.ID != schemas.ChildID(p.ExecutionID+"/0", schemas.TypeJourneyWake, 0) || env.Type != schemas.TypeJourneyWake ||
			env.Key != e.ws+":"+contact || env.CausationID != schemas.JourneyStartedEnvelopeID(p.ExecutionID) ||
			p.Position != "0" || !p.DueAt.Equal(at) {
			t.Errorf("wake-up %+v %+v", env, p)
		}
		delete(due, p.ExecutionID)
	}
	var left int
	if err := e.h.PG.QueryRow(ctx, `SELECT count(*) FROM journey_wakes w JOIN journey_executions e ON e.id = w.execution_id WHERE e.workspace_id = $1`, e.ws).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d executions still to relay (%v)", left, err)
	}
}
