package journeys_test

import (
	"context"
	"errors"
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

// TestPeekRunsInOneStatement: PeekRuns answers each key in order: a
// missing execution ErrNotFound, an execution read for two envelopes
// twice, Ran only for the envelope whose handling recorded a step.
func TestPeekRunsInOneStatement(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	j, _, err := f.store.Create(ctx, f.ws, f.def(t, `{"name":"R","status":"active","reentry":"always","trigger":{"type":"api_event"},"steps":[{"type":"exit"},{"type":"exit"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f.contact(t, "p@example.com", "ACTIVE")
	execs, _ := f.startMany(t, []journeys.StartInput{{Workspace: f.ws, JourneyID: j.ID, Trigger: "api_event", Email: "p@example.com", ExecutionID: schemas.NewID()}})
	e := execs[0]
	if _, err := f.store.AdvanceAll(ctx, []journeys.Advance{{Step: journeys.StepRun{ExecutionID: e.ID, Address: "0", StepType: schemas.StepExit,
		Outcome: schemas.StepOutcomeDone, CauseID: "ran", DoneAt: time.Now().UTC()}, Next: "1"}}); err != nil {
		t.Fatal(err)
	}
	got, err := f.store.PeekRuns(ctx, []journeys.RunKey{{ID: e.ID, CauseID: "new"}, {ID: schemas.NewID(), CauseID: "new"}, {ID: e.ID, CauseID: "ran"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		found, ran bool
	}{{true, false}, {false, false}, {true, true}} {
		p := got[i]
		if want.found != (p.Err == nil) || p.Ran != want.ran {
			t.Errorf("key %d: err %v ran %v, want found %v ran %v", i, p.Err, p.Ran, want.found, want.ran)
		}
		if want.found && (p.Run.ID != e.ID || p.Run.Position != "1" || p.Run.Email != "p@example.com" || p.Run.JourneyStatus != "active") {
			t.Errorf("key %d: %+v", i, p.Run)
		}
		if !want.found && !errors.Is(p.Err, journeys.ErrNotFound) {
			t.Errorf("key %d: %v, want ErrNotFound", i, p.Err)
		}
	}
}

// TestStepRunsGoWithTheirExecution: with no foreign key on
// journey_step_runs (migration 0087), deleting a contact still deletes its
// executions' recorded steps (journey_executions_deleted), and no other
// execution's.
func TestStepRunsGoWithTheirExecution(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	j, _, err := f.store.Create(ctx, f.ws, f.def(t, `{"name":"R","status":"active","reentry":"always","trigger":{"type":"api_event"},"steps":[{"type":"exit"},{"type":"exit"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	gone := f.contact(t, "gone@example.com", "ACTIVE")
	f.contact(t, "kept@example.com", "ACTIVE")
	execs, errs := f.startMany(t, []journeys.StartInput{
		{Workspace: f.ws, JourneyID: j.ID, Trigger: "api_event", Email: "gone@example.com", ExecutionID: schemas.NewID()},
		{Workspace: f.ws, JourneyID: j.ID, Trigger: "api_event", Email: "kept@example.com", ExecutionID: schemas.NewID()},
	})
	var adv []journeys.Advance
	for i, e := range execs {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		adv = append(adv, journeys.Advance{Step: journeys.StepRun{ExecutionID: e.ID, Address: "0", StepType: schemas.StepExit,
			Outcome: schemas.StepOutcomeDone, CauseID: "c", DoneAt: time.Now().UTC()}, Next: "1"})
	}
	if _, err := f.store.AdvanceAll(ctx, adv); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pg.Exec(ctx, `DELETE FROM contacts WHERE id = $1`, gone); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{0, 1} {
		var n int
		if err := f.pg.QueryRow(ctx, `SELECT count(*) FROM journey_step_runs WHERE execution_id = $1`, execs[i].ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("execution %d: %d recorded steps after the deletion of execution 0's contact, want %d", i, n, want)
		}
	}
}
