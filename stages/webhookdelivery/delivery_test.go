package webhookdelivery_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
	"sendstream/sinks/webhook/webhooktest"
	"sendstream/stages/webhookdelivery"
)

// seen is one request a receiver got.
type seen struct {
	at     time.Time
	header http.Header
	body   []byte
}

// recorder records requests and answers with the next status of its list
// (the last repeats).
type recorder struct {
	mu       sync.Mutex
	reqs     []seen
	statuses []int
	header   http.Header // added to every answer
}

func (r *recorder) handle(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, seen{at: time.Now(), header: req.Header.Clone(), body: b})
	st := r.statuses[min(len(r.reqs)-1, len(r.statuses)-1)]
	for k, v := range r.header {
		w.Header()[k] = v
	}
	r.mu.Unlock()
	w.WriteHeader(st)
}

func (r *recorder) got() []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

func handle(t *testing.T, st *webhookdelivery.Stage, env schemas.Envelope) []schemas.WebhookAttempt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outs, err := st.Handle(ctx, env)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	for _, o := range outs {
		if o.Key != env.Key {
			t.Errorf("attempt key %q, want the delivery's %q", o.Key, env.Key)
		}
	}
	return attempts(t, outs)
}

// TestQuickRetries: 500, 500, then 204: three attempts in one Handle, 1 s
// then 2 s apart, numbered 1, 2, 3 in X-Webhook-Attempt; the log says
// retry, retry, ok, each failed one with its next attempt time.
func TestQuickRetries(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	rec := &recorder{statuses: []int{500, 500, 204}}
	rcv := webhooktest.NewReceiver(t, false, rec.handle)
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL+"/hook")
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback}, nil)

	as := handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL+"/hook", 1))
	if got := outcomes(as); !slices.Equal(got, []string{"1:retry", "2:retry", "3:ok"}) {
		t.Fatalf("outcomes %v", got)
	}
	reqs := rec.got()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if r.header.Get("X-Webhook-Attempt") != []string{"1", "2", "3"}[i] {
			t.Errorf("request %d: X-Webhook-Attempt %q", i, r.header.Get("X-Webhook-Attempt"))
		}
	}
	if d := reqs[1].at.Sub(reqs[0].at); d < time.Second {
		t.Errorf("second attempt %s after the first, want at least 1 s", d)
	}
	if d := reqs[2].at.Sub(reqs[1].at); d < 2*time.Second {
		t.Errorf("third attempt %s after the second, want at least 2 s", d)
	}
	if as[0].StatusCode != 500 || as[0].NextAttemptAt == nil || as[0].NextAttemptAt.Sub(as[0].At) != time.Second ||
		as[1].NextAttemptAt == nil || as[1].NextAttemptAt.Sub(as[1].At) != 2*time.Second || as[2].StatusCode != 204 || as[2].Error != "" {
		t.Errorf("attempts %+v", as)
	}
}

// TestLaterAttemptsAreScheduled: a third failed attempt leaves the stage
// with outcome retry and the next attempt 5 minutes later (the durable
// part of the schedule); the tenth is failed for good.
func TestLaterAttemptsAreScheduled(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	rec := &recorder{statuses: []int{503}}
	rcv := webhooktest.NewReceiver(t, false, rec.handle)
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL)
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback}, nil)

	as := handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 3))
	if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeRetry || as[0].NextAttemptAt == nil || as[0].NextAttemptAt.Sub(as[0].At) != 5*time.Minute {
		t.Fatalf("attempt 3: %+v", as)
	}
	as = handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 10))
	if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeFailed || as[0].NextAttemptAt != nil {
		t.Fatalf("attempt 10: %+v", as)
	}
	if n := len(rec.got()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

// TestThrottledIsNotAnAttempt: 429 with Retry-After 1, then 204: the
// receiver sees attempt 1 twice; the log has throttled then ok, both
// attempt 1, the throttled one with its own envelope id.
func TestThrottledIsNotAnAttempt(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	rec := &recorder{statuses: []int{429, 204}, header: http.Header{"Retry-After": {"1"}}}
	rcv := webhooktest.NewReceiver(t, false, rec.handle)
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL)
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback}, nil)

	ctx := context.Background()
	env := delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 1)
	outs, err := st.Handle(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	as := attempts(t, outs)
	if got := outcomes(as); !slices.Equal(got, []string{"1:throttled", "1:ok"}) {
		t.Fatalf("outcomes %v", got)
	}
	if outs[0].ID == outs[1].ID || as[0].Throttled != 1 || as[0].StatusCode != 429 {
		t.Fatalf("throttled attempt %+v id %s, ok id %s", as[0], outs[0].ID, outs[1].ID)
	}
	for i, r := range rec.got() {
		if r.header.Get("X-Webhook-Attempt") != "1" {
			t.Errorf("request %d: X-Webhook-Attempt %q, want 1", i, r.header.Get("X-Webhook-Attempt"))
		}
	}
}

// TestGoneDeletesSubscription: 410 deletes the REST hook; a later
// delivery to it is skipped without a request.
func TestGoneDeletesSubscription(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	rec := &recorder{statuses: []int{410}}
	rcv := webhooktest.NewReceiver(t, false, rec.handle)
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL)
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback}, nil)

	as := handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 1))
	if got := outcomes(as); !slices.Equal(got, []string{"1:retired"}) {
		t.Fatalf("outcomes %v", got)
	}
	var n int
	if err := pg.QueryRow(context.Background(), `SELECT count(*) FROM webhook_subscriptions WHERE id = $1`, sub).Scan(&n); err != nil || n != 0 {
		t.Fatalf("subscription rows %d (err %v), want 0", n, err)
	}
	as = handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 1))
	if got := outcomes(as); !slices.Equal(got, []string{"1:skipped"}) {
		t.Fatalf("after 410: outcomes %v", got)
	}
	if n := len(rec.got()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// TestRedirectNotFollowed: a 302 is a failed attempt; the place it points
// to gets nothing.
func TestRedirectNotFollowed(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	other := webhooktest.NewReceiver(t, false, nil)
	rec := &recorder{statuses: []int{302}, header: http.Header{"Location": {other.URL + "/elsewhere"}}}
	rcv := webhooktest.NewReceiver(t, false, rec.handle)
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL)
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback}, nil)

	as := handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 3))
	if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeRetry || as[0].StatusCode != 302 || !strings.Contains(as[0].Error, "not followed") {
		t.Fatalf("attempts %+v", as)
	}
	if n := other.Hits.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests", n)
	}
}

// TestPrivateAddressRefusedAtDial: without the allowed range, a target on
// 127.0.0.1 is refused when dialling; the receiver gets nothing.
func TestPrivateAddressRefusedAtDial(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	rcv := webhooktest.NewReceiver(t, false, nil)
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL)
	st := newStage(t, pg, webhookdelivery.Config{}, nil)

	as := handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 3))
	if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeRetry || as[0].StatusCode != 0 || !strings.Contains(as[0].Error, webhook.ErrPrivateAddress.Error()) {
		t.Fatalf("attempts %+v", as)
	}
	if n := rcv.Hits.Load(); n != 0 {
		t.Fatalf("the private receiver got %d requests", n)
	}
}

// TestSignedDelivery: a target with a secret gets the Standard Webhooks
// headers, which the reference library verifies, and X-Signature-256 as
// defined; every delivery has the JSON content type, a User-Agent naming
// the service and X-Webhook-Event. A REST hook (no secret) is unsigned.
func TestSignedDelivery(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	rec := &recorder{statuses: []int{200}}
	rcv := webhooktest.NewReceiver(t, false, rec.handle)
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	eps := &secretTargets{hooks: map[string]webhook.Hook{"ep1": {Kind: schemas.WebhookTargetEndpoint, ID: "ep1", URL: rcv.URL, Secrets: []string{secret}}}}
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback}, eps)

	env := delivery(t, ws, schemas.WebhookTargetEndpoint, "ep1", rcv.URL, 1)
	if got := outcomes(handle(t, st, env)); !slices.Equal(got, []string{"1:ok"}) {
		t.Fatalf("outcomes %v", got)
	}
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL)
	handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 1))

	reqs := rec.got()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	signed, plain := reqs[0], reqs[1]
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(signed.body, signed.header); err != nil {
		t.Fatalf("reference verifier: %v (headers %v)", err, signed.header)
	}
	if want := webhook.LegacySignature(webhook.SecretKey(secret), signed.body); signed.header.Get("X-Signature-256") != want {
		t.Errorf("X-Signature-256 %q, want %q", signed.header.Get("X-Signature-256"), want)
	}
	for _, r := range reqs {
		if r.header.Get("Content-Type") != "application/json" || !strings.Contains(r.header.Get("User-Agent"), "Sendstream") ||
			r.header.Get("X-Webhook-Event") != "CONTACT_CREATED" {
			t.Errorf("headers %v", r.header)
		}
	}
	if plain.header.Get("webhook-signature") != "" || plain.header.Get("X-Signature-256") != "" {
		t.Errorf("a REST hook delivery is signed: %v", plain.header)
	}
}

// TestReceiverGarbage: a 50 MB answer, a non-UTF-8 answer and a TLS
// receiver the stage does not trust are failed attempts with a bounded,
// valid UTF-8 error text.
func TestReceiverGarbage(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	big := webhooktest.NewReceiver(t, false, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(200)
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range 50 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	binary := webhooktest.NewReceiver(t, false, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(500)
		b := make([]byte, 4096)
		for i := range b {
			b[i] = byte(0x80 + i%64)
		}
		_, _ = w.Write(b)
	})
	tlsRcv := webhooktest.NewReceiver(t, true, nil)
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback}, nil)
	for _, url := range []string{big.URL, binary.URL, tlsRcv.URL} {
		sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", url)
		as := handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, url, 3))
		if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeRetry || as[0].Error == "" ||
			len(as[0].Error) > webhook.MaxErrorText || !utf8.ValidString(as[0].Error) {
			t.Errorf("%s: attempts %+v", url, as)
		}
	}
	if tlsRcv.Hits.Load() != 0 {
		t.Errorf("the untrusted TLS receiver handled a request")
	}
}

// TestHangingReceiverHoldsOnlyItsKey: while one target's receiver hangs,
// Handle calls for another target complete; the hanging one ends as a
// failed attempt when its time-out passes.
func TestHangingReceiverHoldsOnlyItsKey(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	release := make(chan struct{})
	var hanging atomic.Int64
	slow := webhooktest.NewReceiver(t, false, func(w http.ResponseWriter, r *http.Request) {
		hanging.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	fast := webhooktest.NewReceiver(t, false, nil)
	slowSub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", slow.URL)
	fastSub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", fast.URL)
	st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback, Timeout: 3 * time.Second}, nil)

	slowDone := make(chan []schemas.WebhookAttempt, 1)
	go func() {
		slowDone <- handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, slowSub, slow.URL, 3))
	}()
	for hanging.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 5 {
		as := handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, fastSub, fast.URL, 1))
		if got := outcomes(as); !slices.Equal(got, []string{"1:ok"}) {
			t.Fatalf("fast delivery %d: %v", i, got)
		}
	}
	select {
	case as := <-slowDone:
		t.Fatalf("the hanging delivery finished before the others: %+v", as)
	default:
	}
	as := <-slowDone
	close(release)
	if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeRetry || as[0].StatusCode != 0 || as[0].Error == "" {
		t.Fatalf("hanging delivery: %+v", as)
	}
}

// TestLongRetryAfterIsScheduled: a 429 asking for 2 minutes is not waited
// out in the stage: one request, logged throttled with the next try at
// Retry-After (within the schedule's bounds) and the attempt number kept;
// a Retry-After beyond the schedule's longest wait is cut to it.
func TestLongRetryAfterIsScheduled(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	for _, c := range []struct {
		retryAfter string
		want       time.Duration
	}{{"120", 2 * time.Minute}, {"999999", 10 * time.Hour}} {
		rec := &recorder{statuses: []int{429}, header: http.Header{"Retry-After": {c.retryAfter}}}
		rcv := webhooktest.NewReceiver(t, false, rec.handle)
		sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", rcv.URL)
		st := newStage(t, pg, webhookdelivery.Config{AllowPrivate: loopback}, nil)
		as := handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, rcv.URL, 2))
		if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeThrottled || as[0].Attempt != 2 || as[0].NextAttemptAt == nil ||
			as[0].NextAttemptAt.Sub(as[0].At) != c.want {
			t.Errorf("Retry-After %s: attempts %+v", c.retryAfter, as)
		}
		if n := len(rec.got()); n != 1 {
			t.Errorf("Retry-After %s: %d requests, want 1", c.retryAfter, n)
		}
	}
}

// TestNameResolvingPrivateRefusedAtDial: a target whose name resolves to
// 127.0.0.1 when the delivery connects (as after DNS rebinding) is
// refused by the dial-time guard; the receiver gets nothing.
func TestNameResolvingPrivateRefusedAtDial(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	rcv := webhooktest.NewReceiver(t, false, nil)
	dns := webhooktest.StartDNS(t)
	dns.Set("rebind.example.com", webhooktest.Addrs("127.0.0.1"))
	url := "http://rebind.example.com:" + rcv.Port() + "/hook"
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", url)
	st := newStage(t, pg, webhookdelivery.Config{Guard: webhook.NewGuard(webhook.GuardConfig{Resolver: dns.Resolver()})}, nil)

	as := handle(t, st, delivery(t, ws, schemas.WebhookTargetSubscription, sub, url, 3))
	if len(as) != 1 || as[0].Outcome != schemas.WebhookOutcomeRetry || !strings.Contains(as[0].Error, webhook.ErrPrivateAddress.Error()) {
		t.Fatalf("attempts %+v", as)
	}
	if n := rcv.Hits.Load(); n != 0 {
		t.Fatalf("the receiver behind the name got %d requests", n)
	}
}
