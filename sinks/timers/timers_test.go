package timers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/deploy/stack"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/timers"
)

// TestScheduleInTxUniqueAndDue: a timer scheduled in a rolled-back
// transaction never fires; one scheduled in a committed transaction fires
// once when due, though it was scheduled three times (twice in its
// transaction, once after), and not before.
func TestScheduleInTxUniqueAndDue(t *testing.T) {
	pg := stack.PG(t)
	pub := &pipelinetest.Publisher{}
	queue := "timers_test_" + schemas.NewID()[16:]
	tm, err := timers.Start(context.Background(), pg, pub, timers.Config{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tm.Close() })
	ctx := context.Background()
	due := time.Now().Add(2 * time.Second)
	kept := schemas.Envelope{ID: schemas.NewID(), Workspace: "w", Type: "x.test.v1", Key: "k", OccurredAt: due, Payload: []byte(`{"a":1}`)}
	dropped := schemas.Envelope{ID: schemas.NewID(), Workspace: "w", Type: "x.test.v1", Key: "k", OccurredAt: due, Payload: []byte(`{}`)}

	tx, err := pg.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tm.Schedule(ctx, tx, schemas.TopicJourneys, dropped, time.Now()); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	err = pgx.BeginFunc(ctx, pg, func(tx pgx.Tx) error {
		for range 2 {
			if err := tm.Schedule(ctx, tx, schemas.TopicJourneys, kept, due); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tm.Schedule(ctx, nil, schemas.TopicJourneys, kept, due); err != nil {
		t.Fatal(err)
	}
	if got := pub.Published(schemas.TopicJourneys); len(got) != 0 && time.Now().Before(due) {
		t.Fatalf("published before due: %v", got)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(pub.Published(schemas.TopicJourneys)) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(6 * time.Second) // room for a duplicate or the rolled-back one
	got := pub.Published(schemas.TopicJourneys)
	// River keeps the job's arguments as jsonb: the payload comes back
	// as equal JSON, not the same bytes.
	if len(got) != 1 || got[0].ID != kept.ID || strings.ReplaceAll(string(got[0].Payload), " ", "") != `{"a":1}` {
		t.Fatalf("published %+v, want exactly the committed timer once", got)
	}
	if got[0].OccurredAt.Before(due.Add(-time.Millisecond)) {
		t.Errorf("envelope changed: %v", got[0].OccurredAt)
	}
}

// TestRescueAfterBelowJobTimeoutRefused: a rescue time the job timeout
// would outlast is refused.
func TestRescueAfterBelowJobTimeoutRefused(t *testing.T) {
	pg := stack.PG(t)
	if _, err := timers.Start(context.Background(), pg, &pipelinetest.Publisher{}, timers.Config{RescueAfter: 10 * time.Second}); err == nil {
		t.Fatal("RescueAfter of 10 s accepted")
	}
}

func TestQueueFor(t *testing.T) {
	for prefix, want := range map[string]string{
		"":            "timers",
		"t123.":       "timers_t123",
		"Test-Run_9.": "timers_test_run_9",
	} {
		if got := timers.QueueFor(prefix); got != want {
			t.Errorf("QueueFor(%q) = %q, want %q", prefix, got, want)
		}
	}
	long := timers.QueueFor(strings.Repeat("x", 100))
	if len(long) != 64 || long == timers.QueueFor(strings.Repeat("x", 101)) {
		t.Errorf("long prefixes: %q", long)
	}
}

// TestInjectedClock: on an injected clock a timer due in two days fires
// when the clock is moved past it, not before, and River's tables are in
// the schema named like the queue (its own leader, on that clock).
func TestInjectedClock(t *testing.T) {
	pg := stack.PG(t)
	ctx := context.Background()
	pub := &pipelinetest.Publisher{}
	clock := &pipelinetest.Clock{}
	queue := "timers_clock_" + strings.ToLower(schemas.NewID()[16:])
	tm, err := timers.Start(ctx, pg, pub, timers.Config{Queue: queue, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tm.Close()
		if _, err := pg.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{queue}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", queue, err)
		}
	})
	env := schemas.Envelope{ID: schemas.NewID(), Workspace: "w", Type: "x.test.v1", Key: "k", OccurredAt: time.Now(), Payload: []byte(`{}`)}
	if err := tm.Schedule(ctx, nil, schemas.TopicJourneys, env, clock.Now().Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var jobs int
	if err := pg.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{queue, "river_job"}.Sanitize()).Scan(&jobs); err != nil || jobs != 1 {
		t.Fatalf("jobs in schema %s: %d, %v; want the timer", queue, jobs, err)
	}
	time.Sleep(6 * time.Second) // longer than River's scheduler interval
	if got := pub.Published(schemas.TopicJourneys); len(got) != 0 {
		t.Fatalf("published before the clock reached the timer: %v", got)
	}
	clock.Advance(48*time.Hour + time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for len(pub.Published(schemas.TopicJourneys)) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if got := pub.Published(schemas.TopicJourneys); len(got) != 1 || got[0].ID != env.ID {
		t.Fatalf("published %+v after the clock passed the timer, want it once", got)
	}
}
