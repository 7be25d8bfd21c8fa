package journeys_test

import (
	"context"
	"testing"
	"time"

	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// TestAdvanceAllEndsOneContactsExecutionsTogether: one AdvanceAll finishes
// six executions of one contact on an always journey (and names one of
// them twice): each is locked, recorded and completed once, the second
// naming answers not locked, and the re-entry guard counts none running
// (each ending released it once, though they share one guard row).
func TestAdvanceAllEndsOneContactsExecutionsTogether(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	j, _, err := f.store.Create(ctx, f.ws, f.def(t, `{"name":"R","status":"active","reentry":"always","trigger":{"type":"api_event"},"steps":[{"type":"exit"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f.contact(t, "a@example.com", "ACTIVE")
	var ins []journeys.StartInput
	for range 6 {
		ins = append(ins, journeys.StartInput{Workspace: f.ws, JourneyID: j.ID, Trigger: "api_event", Email: "a@example.com", ExecutionID: schemas.NewID()})
	}
	execs, errs := f.startMany(t, ins)
	var adv []journeys.Advance
	for i, e := range execs {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		adv = append(adv, journeys.Advance{Step: journeys.StepRun{ExecutionID: e.ID, Address: "0", StepType: schemas.StepExit,
			Outcome: schemas.StepOutcomeExited, Final: journeys.StateCompleted, CauseID: "cause-" + e.ID, DoneAt: time.Now().UTC()}})
	}
	adv = append(adv, adv[2])
	got, err := f.store.AdvanceAll(ctx, adv)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range got {
		want := journeys.Advanced{Locked: i < 6, Recorded: i < 6}
		if a != want {
			t.Errorf("advance %d: %+v, want %+v", i, a, want)
		}
	}
	var entries, running, completed int64
	if err := f.pg.QueryRow(ctx, `SELECT entries, running, (SELECT count(*) FROM journey_executions WHERE journey_id = $1 AND state = 'completed'
		AND finished_at IS NOT NULL) FROM journey_entries WHERE journey_id = $1`, j.ID).Scan(&entries, &running, &completed); err != nil {
		t.Fatal(err)
	}
	if entries != 6 || running != 0 || completed != 6 {
		t.Errorf("%d entries, %d running, %d completed; want 6, 0, 6", entries, running, completed)
	}
}
