package timers_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/deploy/stack"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/timers"
)

// TestInserterBesideStart: an Inserter and a working client set up at the
// same time on a fresh injected-clock schema (as the server's trigger
// endpoint and its journey engine do) both migrate it without failing;
// a timer the Inserter stores within a transaction is published once by
// the working client when due on that clock, and the Inserter itself
// publishes nothing.
func TestInserterBesideStart(t *testing.T) {
	pg := stack.PG(t)
	ctx := context.Background()
	queue := "timers_ins_" + schemas.NewID()[16:]
	t.Cleanup(func() {
		_, _ = pg.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{queue}.Sanitize()+` CASCADE`)
	})
	clock := &pipelinetest.Clock{}
	pub := &pipelinetest.Publisher{}
	var (
		wg       sync.WaitGroup
		worker   *timers.Timers
		ins      *timers.Timers
		werr, ie error
	)
	wg.Go(func() { worker, werr = timers.Start(ctx, pg, pub, timers.Config{Queue: queue, Clock: clock}) })
	wg.Go(func() { ins, ie = timers.Inserter(ctx, pg, timers.Config{Queue: queue, Clock: clock}) })
	wg.Wait()
	if werr != nil || ie != nil {
		t.Fatalf("Start: %v; Inserter: %v", werr, ie)
	}
	t.Cleanup(func() { _ = worker.Close(); _ = ins.Close() })
	due := clock.Now().Add(time.Hour)
	env := schemas.Envelope{ID: schemas.NewID(), Workspace: "w", Type: "x.test.v1", Key: "k", OccurredAt: due, Payload: []byte(`{}`)}
	if err := pgx.BeginFunc(ctx, pg, func(tx pgx.Tx) error {
		return ins.ScheduleMany(ctx, tx, []timers.Timer{{Topic: schemas.TopicJourneys, Env: env, At: due}})
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if got := pub.Published(schemas.TopicJourneys); len(got) != 0 {
		t.Fatalf("published %d before due", len(got))
	}
	clock.Advance(time.Hour + time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for len(pub.Published(schemas.TopicJourneys)) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // room for a duplicate
	if got := pub.Published(schemas.TopicJourneys); len(got) != 1 || got[0].ID != env.ID {
		t.Fatalf("published %+v, want the Inserter's timer once", got)
	}
}
