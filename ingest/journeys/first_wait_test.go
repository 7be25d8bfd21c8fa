package journeys_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

// testQueue is the River queue of the tests' timers: no process works it.
const testQueue = "timers_ingest_journeys_test"

// TestTriggerStartsInFirstWait: a trigger on a journey whose first step is
// a delay answers once the execution is stored waiting at that step and
// its timer (the engine's wake-up envelope, due at the delay's end) is
// stored with it; a journey beginning with another step starts not
// waiting and without a timer (the engine runs it).
func TestTriggerStartsInFirstWait(t *testing.T) {
	e := start(t, ingesttest.WorkspaceOpts{})
	ctx := context.Background()
	_, tk := e.journey(t, e.ws, apiJourney("active", "always")) // delay 1h
	_, xk := e.journey(t, e.ws, `{"name":"X","status":"active","reentry":"always","trigger":{"type":"api_event"},"steps":[{"type":"exit"}]}`)
	e.contact(t, "wait@example.com", "ACTIVE")
	for _, c := range []struct {
		key     string
		waiting bool
	}{{tk, true}, {xk, false}, {tk, true}} {
		st, b := e.trigger(t, e.key, c.key, map[string]any{"email": "wait@example.com"})
		var o outcome
		if err := json.Unmarshal(b, &o); err != nil || st != 200 {
			t.Fatalf("trigger: %d %s", st, b)
		}
		var started time.Time
		var wake *time.Time
		if err := e.h.PG.QueryRow(ctx, `SELECT started_at, next_wake_at FROM journey_executions WHERE id = $1 AND position = '0' AND state = 'active'`,
			o.ExecutionID).Scan(&started, &wake); err != nil {
			t.Fatal(err)
		}
		wakeID := schemas.ChildID(o.ExecutionID+"/0", schemas.TypeJourneyWake, 0)
		var jobs int
		var at time.Time
		var packed string
		err := e.h.PG.QueryRow(ctx, `SELECT count(*) OVER (), scheduled_at, args->>'envelope' FROM river_job WHERE queue = $1 AND args->>'envelopeId' = $2`,
			testQueue, wakeID).Scan(&jobs, &at, &packed)
		if !c.waiting {
			if wake != nil || err == nil {
				t.Errorf("exit journey: wake %v, timer %v (%d)", wake, err, jobs)
			}
			continue
		}
		if err != nil || wake == nil || !wake.Equal(started.Add(time.Hour)) || jobs != 1 || !at.Equal(*wake) {
			t.Fatalf("delay journey: started %s wake %v; timer %d at %s, %v", started, wake, jobs, at, err)
		}
		var env schemas.Envelope
		var p schemas.JourneyWake
		if err := json.Unmarshal([]byte(packed), &env); err != nil || json.Unmarshal(env.Payload, &p) != nil {
			t.Fatalf("timer envelope %s: %v", packed, err)
		}
		if env.ID != wakeID || env.Type != schemas.TypeJourneyWake || env.Workspace != e.ws || env.Key != e.ws+":"+o.ContactID ||
			env.CausationID != schemas.JourneyStartedEnvelopeID(o.ExecutionID) || p.ExecutionID != o.ExecutionID || p.Position != "0" || !p.DueAt.Equal(*wake) {
			t.Errorf("timer envelope %+v %+v", env, p)
		}
	}
}
