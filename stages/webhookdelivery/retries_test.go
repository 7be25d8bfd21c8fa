package webhookdelivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/webhook/webhooktest"
	"sendstream/stages/webhookdelivery"
)

// TestLaterAttemptIsDurable: a third failed attempt becomes one River job
// in Postgres, scheduled 5 minutes on, holding the delivery of attempt 4;
// handling the envelope again schedules nothing more, nor does scheduling
// one envelope twice. A job that is due is published to the deliveries
// topic.
func TestLaterAttemptIsDurable(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	rec := &recorder{statuses: []int{500}}
	rcv := webhooktest.NewReceiver(t, false, rec.handle)
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL)
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
	rows, err := pg.Query(ctx, `SELECT scheduled_at, args FROM river_job WHERE queue = $1 AND kind = 'webhook_delivery_retry'`, queue)
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

	// The same envelope scheduled again, in another statement, is the same
	// job.
	again := delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 5)
	for range 2 {
		if err := sched.Schedule(ctx, again, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pg.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE queue = $1 AND args->>'envelopeId' = $2`, queue, again.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d jobs of one envelope scheduled twice (err %v), want 1", n, err)
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

// TestWholeSchedule drives attempts 3 to 10 under an injected clock, each
// from the envelope the previous one's River job holds: the jobs are due
// +5 min, +30 min, +2 h, +5 h, +8 h, +8 h and +10 h after their attempt,
// the receiver sees X-Webhook-Attempt 3 … 10, and the tenth failure is
// final, with no job after it.
func TestWholeSchedule(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	rec := &recorder{statuses: []int{500}}
	rcv := webhooktest.NewReceiver(t, false, rec.handle)
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	queue := "test_" + schemas.NewID()
	t.Cleanup(func() { _, _ = pg.Exec(context.Background(), `DELETE FROM river_job WHERE queue = $1`, queue) })
	sched, err := webhookdelivery.StartScheduler(ctx, pg, &pipelinetest.Publisher{}, webhookdelivery.SchedulerConfig{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now().Add(time.Hour).Truncate(time.Second)}
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback, Now: clk.now}, nil, sched)
	defer st.Close()

	env := delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 3)
	want := []time.Duration{5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 8 * time.Hour, 8 * time.Hour, 10 * time.Hour}
	for n := 3; n <= 10; n++ {
		at := clk.now()
		as := handle(t, st, env)
		if n == 10 {
			if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeFailed || as[0].NextAttemptAt != nil {
				t.Fatalf("attempt 10: %+v", as)
			}
			break
		}
		if len(as) != 1 || as[0].Attempt != n || as[0].Outcome != schemas.WebhookOutcomeRetry || !as[0].NextAttemptAt.Equal(at.Add(want[n-3]).UTC()) {
			t.Fatalf("attempt %d: %+v", n, as)
		}
		var scheduled time.Time
		var args struct{ Envelope schemas.Envelope }
		err := pg.QueryRow(ctx, `SELECT scheduled_at, args FROM river_job WHERE queue = $1 AND kind = 'webhook_delivery_retry' AND state = 'scheduled' ORDER BY id DESC LIMIT 1`, queue).Scan(&scheduled, &args)
		if err != nil {
			t.Fatalf("attempt %d: no job: %v", n, err)
		}
		if !scheduled.Equal(at.Add(want[n-3])) {
			t.Fatalf("attempt %d: job due %s, want %s", n, scheduled, at.Add(want[n-3]))
		}
		var next schemas.WebhookDelivery
		if err := json.Unmarshal(args.Envelope.Payload, &next); err != nil || next.Attempt != n+1 {
			t.Fatalf("attempt %d: job holds %+v (%v)", n, next, err)
		}
		clk.add(want[n-3])
		env = args.Envelope
	}
	var jobs int
	if err := pg.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE queue = $1 AND kind = 'webhook_delivery_retry'`, queue).Scan(&jobs); err != nil || jobs != 7 {
		t.Fatalf("%d jobs (err %v), want 7", jobs, err)
	}
	reqs := rec.got()
	if len(reqs) != 8 {
		t.Fatalf("%d requests, want 8", len(reqs))
	}
	for i, r := range reqs {
		if got := r.header.Get("X-Webhook-Attempt"); got != fmt.Sprint(i+3) {
			t.Errorf("request %d: X-Webhook-Attempt %s, want %d", i, got, i+3)
		}
	}
}
