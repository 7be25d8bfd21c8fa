package webhookdelivery_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
	"sendstream/sinks/webhook/webhooktest"
	"sendstream/stages/webhookdelivery"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// endpointStage returns the delivery stage with REST hooks and the real
// endpoint store, both on clk, accepting the test receivers' self-signed
// certificates. Targets are looked up for every delivery (LookupTTL -1):
// with the default cache a rotation or a disable takes effect within
// webhook.TargetTTL, which these tests do not wait out.
func endpointStage(t *testing.T, pg *pgxpool.Pool, clk *clock) (*webhookdelivery.Stage, *webhook.EndpointStore) {
	t.Helper()
	eps, err := webhook.NewEndpointStore(pg, webhook.EndpointStoreConfig{Secret: "endpoint-test-secret-0123456789abcdef", Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	rest := webhook.NewRESTHooks(pg)
	st := webhookdelivery.New(webhookdelivery.Config{AllowPrivate: loopback, InsecureTLS: true, Now: clk.now, LookupTTL: -1},
		map[string]webhookdelivery.Targets{rest.Kind(): rest, eps.Kind(): eps}, nil)
	return st, eps
}

// verifies reports whether the reference library verifies r under
// secret. Once the test clock has moved on, the timestamp (signed at the
// stage's clock) is not checked against the real time.
func verifies(t *testing.T, secret string, r seen, clockMoved bool) bool {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if clockMoved {
		return wh.VerifyIgnoringTimestamp(r.body, r.header) == nil
	}
	return wh.Verify(r.body, r.header) == nil
}

// TestEndpointSignedAcrossRotation: a dashboard endpoint's deliveries
// verify with the reference library under its secret; after a rotation
// under both the old and the new secret for 24 hours, then only the new.
func TestEndpointSignedAcrossRotation(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	clk := &clock{t: time.Now()}
	rec := &recorder{statuses: []int{204}}
	rcv := webhooktest.NewReceiver(t, true, rec.handle)
	st, eps := endpointStage(t, pg, clk)
	ctx := context.Background()
	oldS, _ := webhook.NewSecret()
	newS, _ := webhook.NewSecret()
	ep, err := eps.Create(ctx, ws, webhook.NewEndpoint{URL: rcv.URL + "/hook", Events: []string{"CONTACT_CREATED"}, Secret: oldS})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func() seen {
		t.Helper()
		as := handle(t, st, delivery(t, ws, schemas.WebhookTargetEndpoint, ep.ID, ep.URL, 1))
		if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeOK {
			t.Fatalf("attempts %+v", as)
		}
		reqs := rec.got()
		return reqs[len(reqs)-1]
	}
	if r := deliver(); !verifies(t, oldS, r, false) || verifies(t, newS, r, false) {
		t.Fatalf("before the rotation: headers %v", r.header)
	}
	if _, err := eps.RotateSecret(ctx, ws, ep.ID, newS); err != nil {
		t.Fatal(err)
	}
	if r := deliver(); !verifies(t, oldS, r, false) || !verifies(t, newS, r, false) {
		t.Fatalf("during the rotation: headers %v", r.header)
	}
	clk.add(webhook.RotationOverlap + time.Hour)
	if r := deliver(); verifies(t, oldS, r, true) || !verifies(t, newS, r, true) {
		t.Fatalf("after the overlap: headers %v", r.header)
	}
}

// TestEndpointDisabledAfter12HoursOfFailures: an endpoint failing since
// more than 12 hours is disabled at its next failure and later deliveries
// are skipped; a REST hook failing as long is not.
func TestEndpointDisabledAfter12HoursOfFailures(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	clk := &clock{t: time.Now()}
	rec := &recorder{statuses: []int{500}}
	rcv := webhooktest.NewReceiver(t, true, rec.handle)
	st, eps := endpointStage(t, pg, clk)
	ctx := context.Background()
	secret, _ := webhook.NewSecret()
	ep, err := eps.Create(ctx, ws, webhook.NewEndpoint{URL: rcv.URL, Events: []string{"CONTACT_CREATED"}, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL)

	for _, step := range []struct {
		after time.Duration
		n     int
		want  string // endpoint outcome
	}{{0, 3, schemas.WebhookOutcomeRetry}, {11 * time.Hour, 4, schemas.WebhookOutcomeRetry}, {2 * time.Hour, 5, schemas.WebhookOutcomeRetired}} {
		clk.add(step.after)
		as := handle(t, st, delivery(t, ws, schemas.WebhookTargetEndpoint, ep.ID, ep.URL, step.n))
		if len(as) != 1 || as[0].Outcome != step.want {
			t.Fatalf("endpoint attempt %d: %+v", step.n, as)
		}
		as = handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, step.n))
		if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeRetry {
			t.Fatalf("REST hook attempt %d: %+v", step.n, as)
		}
	}
	list, err := eps.List(ctx, ws)
	if err != nil || len(list) != 1 || list[0].Enabled || list[0].DisabledReason != webhook.DisabledFailing {
		t.Fatalf("endpoints %+v (err %v)", list, err)
	}
	before := len(rec.got())
	as := handle(t, st, delivery(t, ws, schemas.WebhookTargetEndpoint, ep.ID, ep.URL, 6))
	if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeSkipped || len(rec.got()) != before {
		t.Fatalf("after disabling: %+v, %d requests more", as, len(rec.got())-before)
	}
}

// TestEndpointGoneIsRetired: a 410 disables a dashboard endpoint (kept,
// with its reason) instead of deleting it.
func TestEndpointGoneIsRetired(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	clk := &clock{t: time.Now()}
	rec := &recorder{statuses: []int{410}}
	rcv := webhooktest.NewReceiver(t, true, rec.handle)
	st, eps := endpointStage(t, pg, clk)
	ctx := context.Background()
	secret, _ := webhook.NewSecret()
	ep, err := eps.Create(ctx, ws, webhook.NewEndpoint{URL: rcv.URL, Events: []string{"CONTACT_CREATED"}, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	as := handle(t, st, delivery(t, ws, schemas.WebhookTargetEndpoint, ep.ID, ep.URL, 1))
	if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeRetired {
		t.Fatalf("attempts %+v", as)
	}
	list, err := eps.List(ctx, ws)
	if err != nil || len(list) != 1 || list[0].Enabled || list[0].DisabledReason != webhook.DisabledGone {
		t.Fatalf("endpoints %+v (err %v)", list, err)
	}
}
