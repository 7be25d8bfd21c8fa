package webhookdelivery_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/webhook/webhooktest"
	"sendstream/stages/webhookdelivery"
)

// TestLaterAttemptIsDurable: a third failed attempt becomes one River job
// in Postgres, scheduled 5 minutes on, holding the delivery of attempt 4;
// handling the envelope again schedules nothing more. A job that is due
// is published to the deliveries topic.
func TestLaterAttemptIsDurable(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	rec := &recorder{statuses: []int{500}}
	rcv := webhooktest.NewReceiver(t, false, rec.handle)
	sub := subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pub := &pipelinetest.Publisher{}
	// A queue of its own: no other process's client (a running server on
	// the same database) works this test's jobs; they are deleted after.
	queue := "test_" + schemas.NewID()
	t.Cleanup(func() { _, _ = pg.Exec(context.Background(), `DELETE FROM river_job WHERE queue = $1`, queue) })
	sched, err := webhookdelivery.StartScheduler(ctx, pg, pub, webhookdelivery.SchedulerConfig{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback}, nil, sched)
	defer st.Close()

	env := delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 3)
	for range 2 {
		as := handle(t, st, env)
		if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeRetry {
			t.Fatalf("attempts %+v", as)
		}
	}
	var d schemas.WebhookDelivery
	_ = json.Unmarshal(env.Payload, &d)
	rows, err := pg.Query(ctx, `SELECT scheduled_at, args FROM river_job WHERE queue = $1`, queue)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for rows.Next() {
		var at time.Time
		var args struct{ Envelope schemas.Envelope }
		if err := rows.Scan(&at, &args); err != nil {
			t.Fatal(err)
		}
		n++
		var next schemas.WebhookDelivery
		if err := json.Unmarshal(args.Envelope.Payload, &next); err != nil {
			t.Fatal(err)
		}
		if next.Attempt != 4 || next.MessageID != d.MessageID || args.Envelope.Key != env.Key ||
			at.Before(time.Now().Add(4*time.Minute)) || at.After(time.Now().Add(6*time.Minute)) {
			t.Errorf("job at %s: %+v", at, next)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}

	// A due job is published.
	due := delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 4)
	if err := sched.Schedule(ctx, due, time.Now()); err != nil {
		t.Fatal(err)
	}
	for {
		for _, e := range pub.Published(schemas.TopicWebhookDeliveries) {
			if e.ID == due.ID {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatal("the due job was not published")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
