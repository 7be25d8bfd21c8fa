package timers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"sendstream/deploy/stack"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/timers"
)

// oldArgs is a timer's job arguments as stored before envelopes were
// packed into a string: the envelope as a nested object.
type oldArgs struct {
	EnvelopeID string           `json:"envelopeId" river:"unique"`
	Topic      string           `json:"topic"`
	Envelope   schemas.Envelope `json:"envelope"`
}

func (oldArgs) Kind() string { return "timer_publish" }

// TestScheduleManyPackedAndOldTimers: timers stored together by
// ScheduleMany in one transaction each publish once, as River jobs without
// a unique key, with their envelope kept as one JSON string in the job's args (not
// an object the args' GIN index takes apart); a timer stored in the
// earlier shape, the envelope as an object, still publishes.
func TestScheduleManyPackedAndOldTimers(t *testing.T) {
	pg := stack.PG(t)
	pub := &pipelinetest.Publisher{}
	queue := "timers_test_" + schemas.NewID()[16:]
	tm, err := timers.Start(context.Background(), pg, pub, timers.Config{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tm.Close() })
	ctx := context.Background()
	due := time.Now().Add(time.Second)
	env := func(payload string) schemas.Envelope {
		return schemas.Envelope{ID: schemas.NewID(), Workspace: "w", Type: "x.test.v1", Key: "k", OccurredAt: due, Payload: []byte(payload)}
	}
	many := []timers.Timer{{schemas.TopicJourneys, env(`{"n":1}`), due}, {schemas.TopicJourneys, env(`{"n":2}`), due}, {schemas.TopicJourneys, env(`{"n":3}`), due}}
	if err := pgx.BeginFunc(ctx, pg, func(tx pgx.Tx) error { return tm.ScheduleMany(ctx, tx, many) }); err != nil {
		t.Fatal(err)
	}
	var objects, unique int
	if err := pg.QueryRow(ctx, `SELECT count(*) FILTER (WHERE jsonb_typeof(args->'envelope') <> 'string'),
	                                   count(*) FILTER (WHERE unique_key IS NOT NULL) FROM river_job WHERE queue = $1`, queue).
		Scan(&objects, &unique); err != nil || objects != 0 || unique != 0 {
		t.Fatalf("%d timers with an unpacked envelope, %d with a unique key (%v)", objects, unique, err)
	}
	old := env(`{"n":4}`)
	inserter, err := river.NewClient(riverpgxv5.New(pg), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inserter.Insert(ctx, oldArgs{EnvelopeID: old.ID, Topic: schemas.TopicJourneys, Envelope: old},
		&river.InsertOpts{Queue: queue, ScheduledAt: due, UniqueOpts: river.UniqueOpts{ByArgs: true}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{many[0].Env.ID: `{"n":1}`, many[1].Env.ID: `{"n":2}`, many[2].Env.ID: `{"n":3}`, old.ID: `{"n":4}`}
	deadline := time.Now().Add(30 * time.Second)
	for len(pub.Published(schemas.TopicJourneys)) < len(want) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // room for a duplicate
	got := pub.Published(schemas.TopicJourneys)
	seen := map[string]int{}
	for _, e := range got {
		seen[e.ID]++
		// A packed envelope comes back byte for byte; an object as
		// equal JSON (jsonb's spacing).
		if p, ok := want[e.ID]; !ok || strings.ReplaceAll(string(e.Payload), " ", "") != p || e.Type != "x.test.v1" || e.Key != "k" {
			t.Errorf("published %s %s %s %s, want one of the scheduled envelopes", e.ID, e.Type, e.Key, e.Payload)
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("timer %s published %d times, want once", id, seen[id])
		}
	}
}
