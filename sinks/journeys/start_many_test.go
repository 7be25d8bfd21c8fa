package journeys_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

func (f *fixture) startMany(t *testing.T, ins []journeys.StartInput) ([]journeys.Execution, []error) {
	t.Helper()
	var execs []journeys.Execution
	var errs []error
	err := pgx.BeginFunc(context.Background(), f.pg, func(tx pgx.Tx) error {
		var err error
		execs, errs, err = f.store.StartMany(context.Background(), tx, ins)
		return err
	})
	if err != nil {
		t.Fatalf("StartMany: %v", err)
	}
	return execs, errs
}

// TestStartManyChecksAndReentry: one StartMany gives each start Start's
// answer (every refusal, in input order, the others still starting), and
// starts of one contact within one call follow the re-entry setting as
// separate starts do: once starts the first only, always starts each,
// once_at_a_time the first while it runs.
func TestStartManyChecksAndReentry(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mk := func(reentry, status string) journeys.Journey {
		j, _, err := f.store.Create(ctx, f.ws, f.def(t, `{"name":"R","status":"`+status+`","reentry":"`+reentry+`","trigger":{"type":"api_event"},"steps":[{"type":"delay","duration":"1h"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	a := f.contact(t, "a@example.com", "ACTIVE")
	b := f.contact(t, "b@example.com", "ACTIVE")
	f.contact(t, "u@example.com", "UNSUBSCRIBED")
	in := func(j journeys.Journey, email string) journeys.StartInput {
		return journeys.StartInput{Workspace: f.ws, JourneyID: j.ID, Trigger: "api_event", Email: email, ExecutionID: schemas.NewID(),
			Data: json.RawMessage(`{"plan":"pro"}`)}
	}
	once, always, oat := mk("once", "active"), mk("always", "active"), mk("once_at_a_time", "active")
	ins := []journeys.StartInput{
		in(once, "a@example.com"),
		in(mk("once", "draft"), "a@example.com"),
		{Workspace: f.ws, JourneyID: once.ID, Trigger: "event", Email: "b@example.com", ExecutionID: schemas.NewID()},
		in(once, "nobody@example.com"),
		in(once, "u@example.com"),
		{Workspace: schemas.NewID(), JourneyID: once.ID, Trigger: "api_event", Email: "b@example.com", ExecutionID: schemas.NewID()},
		in(once, "a@example.com"),
		in(always, "a@example.com"),
		in(always, "a@example.com"),
		in(oat, "b@example.com"),
		in(oat, "b@example.com"),
		in(once, "b@example.com"),
	}
	want := []error{nil, journeys.ErrNotActive, journeys.ErrWrongTrigger, journeys.ErrContactNotFound, journeys.ErrContactNotActive,
		journeys.ErrNotFound, journeys.ErrReentry, nil, nil, nil, journeys.ErrReentry, nil}
	execs, errs := f.startMany(t, ins)
	for i := range ins {
		if !errors.Is(errs[i], want[i]) || (want[i] == nil) != (errs[i] == nil) {
			t.Errorf("start %d: %v, want %v", i, errs[i], want[i])
		}
	}
	for _, i := range []int{0, 7, 8} {
		if e := execs[i]; e.ContactID != a || e.Email != "a@example.com" || e.ID != ins[i].ExecutionID || e.Version != 1 || e.Position != "0" ||
			e.State != journeys.StateActive || string(e.Data) != `{"plan":"pro"}` || e.StartedAt.IsZero() {
			t.Errorf("start %d: %+v", i, e)
		}
	}
	if execs[9].ContactID != b || execs[11].ContactID != b {
		t.Errorf("b's starts: %+v %+v", execs[9], execs[11])
	}
	// What was stored is what Start would have stored, and a later Start
	// sees StartMany's guard rows.
	for j, n := range map[string]int{once.ID: 2, always.ID: 2, oat.ID: 1} {
		rows, err := f.store.Executions(ctx, f.ws, j, journeys.StateActive, 100)
		if err != nil || len(rows) != n {
			t.Errorf("journey %s: %d executions %v, want %d", j, len(rows), err, n)
		}
	}
	if _, err := f.start(t, in(once, "a@example.com")); !errors.Is(err, journeys.ErrReentry) {
		t.Errorf("Start after StartMany on once: %v", err)
	}
	if _, err := f.start(t, in(always, "a@example.com")); err != nil {
		t.Errorf("Start after StartMany on always: %v", err)
	}
}

// TestStartManyRacingOnce: concurrent StartMany transactions, each with
// starts of the same contacts in different orders on a once journey, start
// exactly one execution per contact (the guard's row lock; rows are locked
// in one order, so they never deadlock).
func TestStartManyRacingOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	j, _, err := f.store.Create(ctx, f.ws, f.def(t, `{"name":"R","status":"active","reentry":"once","trigger":{"type":"api_event"},"steps":[{"type":"delay","duration":"1h"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	emails := []string{"r1@example.com", "r2@example.com", "r3@example.com", "r4@example.com"}
	for _, e := range emails {
		f.contact(t, e, "ACTIVE")
	}
	const racers = 8
	started := make([]int, racers)
	var wg sync.WaitGroup
	for r := 0; r < racers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ins []journeys.StartInput
			for i := range emails {
				e := emails[(i+r)%len(emails)]
				ins = append(ins, journeys.StartInput{Workspace: f.ws, JourneyID: j.ID, Trigger: "api_event", Email: e, ExecutionID: schemas.NewID()})
			}
			err := pgx.BeginFunc(ctx, f.pg, func(tx pgx.Tx) error {
				_, errs, err := f.store.StartMany(ctx, tx, ins)
				for _, e := range errs {
					if e == nil {
						started[r]++
					} else if !errors.Is(e, journeys.ErrReentry) {
						t.Errorf("racer %d: %v", r, e)
					}
				}
				return err
			})
			if err != nil {
				t.Errorf("racer %d: %v", r, err)
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range started {
		total += n
	}
	rows, err := f.store.Executions(ctx, f.ws, j.ID, "", 100)
	if err != nil || total != len(emails) || len(rows) != len(emails) {
		t.Fatalf("started %d (answers) / %d (stored) %v, want %d", total, len(rows), err, len(emails))
	}
}
