package webhookdelivery_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
	"sendstream/sinks/webhook/webhooktest"
	"sendstream/stages/webhookdelivery"
)

// TestLookupReusedForTargetTTL: the stage reuses a target's lookup for
// webhook.TargetTTL, so a REST hook deleted a moment ago may still receive
// a delivery within that time (what the README states); once it has passed
// the delivery is skipped and nothing reaches the receiver.
func TestLookupReusedForTargetTTL(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	clk := &clock{t: time.Now()}
	rec := &recorder{statuses: []int{204}}
	rcv := webhooktest.NewReceiver(t, false, rec.handle)
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL)
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback, Now: clk.now}, nil)
	if as := handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 1)); len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeOK {
		t.Fatalf("attempts %+v", as)
	}
	if _, err := pg.Exec(context.Background(), `DELETE FROM webhook_subscriptions WHERE id = $1`, sub); err != nil {
		t.Fatal(err)
	}
	clk.add(webhook.TargetTTL / 2)
	if as := handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 1)); len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeOK {
		t.Fatalf("within the TTL: attempts %+v, want the cached target used", as)
	}
	clk.add(webhook.TargetTTL / 2)
	before := len(rec.got())
	if as := handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 1)); len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeSkipped {
		t.Fatalf("after the TTL: attempts %+v, want skipped", as)
	}
	if len(rec.got()) != before {
		t.Fatal("a deleted target received a delivery after the TTL")
	}
}

// clearCounter is the real endpoint store, counting ClearFailing calls.
type clearCounter struct {
	*webhook.EndpointStore
	clears atomic.Int64
}

func (c *clearCounter) ClearFailing(ctx context.Context, ws, id string) error {
	c.clears.Add(1)
	return c.EndpointStore.ClearFailing(ctx, ws, id)
}

// TestSuccessClearsOnlyAFailingEndpoint: successes to an endpoint that is
// not failing write nothing; after a failure (failing_since set) the next
// success ends the run of failures once.
func TestSuccessClearsOnlyAFailingEndpoint(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	clk := &clock{t: time.Now()}
	rec := &recorder{statuses: []int{204, 204, 500, 204, 204}}
	rcv := webhooktest.NewReceiver(t, true, rec.handle)
	eps, err := webhook.NewEndpointStore(pg, webhook.EndpointStoreConfig{Secret: "endpoint-test-secret-0123456789abcdef", Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	cc := &clearCounter{EndpointStore: eps}
	st := webhookdelivery.New(webhookdelivery.Config{AllowPrivate: loopback, InsecureTLS: true, Now: clk.now},
		map[string]webhookdelivery.Targets{schemas.WebhookTargetEndpoint: cc}, nil)
	ctx := context.Background()
	secret, _ := webhook.NewSecret()
	ep, err := eps.Create(ctx, ws, webhook.NewEndpoint{URL: rcv.URL, Events: []string{"CONTACT_CREATED"}, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	failingSince := func() *time.Time {
		var at *time.Time
		if err := pg.QueryRow(ctx, `SELECT failing_since FROM webhook_endpoints WHERE id = $1`, ep.ID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	for range 2 {
		handle(t, st, delivery(t, ws, schemas.WebhookTargetEndpoint, ep.ID, ep.URL, 3))
	}
	if n := cc.clears.Load(); n != 0 {
		t.Fatalf("%d ClearFailing calls for successes of an endpoint not failing, want 0", n)
	}
	// Attempt 3 fails (the durable schedule takes over), then two successes.
	if as := handle(t, st, delivery(t, ws, schemas.WebhookTargetEndpoint, ep.ID, ep.URL, 3)); as[0].Outcome != schemas.WebhookOutcomeRetry {
		t.Fatalf("attempts %+v", as)
	}
	if failingSince() == nil {
		t.Fatal("a failure left failing_since unset")
	}
	for range 2 {
		handle(t, st, delivery(t, ws, schemas.WebhookTargetEndpoint, ep.ID, ep.URL, 4))
	}
	if n := cc.clears.Load(); n != 1 {
		t.Errorf("%d ClearFailing calls after a failure and two successes, want 1", n)
	}
	if at := failingSince(); at != nil {
		t.Errorf("failing_since %v after a success, want unset", at)
	}
}
