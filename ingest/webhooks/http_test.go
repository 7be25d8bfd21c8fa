package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"sendstream/deploy/stack"
	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/webhooks"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
	"sendstream/sinks/webhook/webhooktest"
)

// env is the real server with the webhooks routes, its guard resolving
// names with a DNS server the test controls.
type env struct {
	h   *ingesttest.Harness
	dns *webhooktest.DNS
	g   *webhook.Guard
}

func start(t *testing.T) *env {
	t.Helper()
	dns := webhooktest.StartDNS(t)
	g := webhook.NewGuard(webhook.GuardConfig{Resolver: dns.Resolver()})
	h := ingesttest.Start(t, webhooks.Routes(webhooks.Deps{Store: webhooks.NewStore(stack.PG(t)), Guard: g})...)
	return &env{h: h, dns: dns, g: g}
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// listedEvent is one entry of GET /v1/webhooks/events.
type listedEvent struct {
	Event       string          `json:"event"`
	Description string          `json:"description"`
	DataSchema  json.RawMessage `json:"dataSchema"`
}

// listEvents asks GET /v1/webhooks/events with a new workspace's key and
// returns the list; an answer other than 200 fails t.
func (e *env) listEvents(t *testing.T) []listedEvent {
	t.Helper()
	_, key := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	st, b := e.h.Do("GET", "/api/v1/webhooks/events", key, nil)
	if st != 200 {
		t.Fatalf("%d %s", st, b)
	}
	return decode[struct {
		Events []listedEvent `json:"events"`
	}](t, b).Events
}

type sub struct {
	ID        string `json:"id"`
	Event     string `json:"event"`
	TargetURL string `json:"targetUrl"`
	CreatedAt string `json:"createdAt"`
	Deleted   bool   `json:"deleted"`
}

func (e *env) subscribe(t *testing.T, key, event, url string) (int, []byte) {
	t.Helper()
	return e.h.Do("POST", "/api/v1/webhooks/subscribe", key, map[string]any{"event": event, "targetUrl": url})
}

func (e *env) count(t *testing.T, ws string) int {
	t.Helper()
	var n int
	if err := e.h.PG.QueryRow(context.Background(), `SELECT count(*) FROM webhook_subscriptions WHERE workspace_id = $1`, ws).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func wantError(t *testing.T, what string, st int, b []byte, status int, code string, fields ...string) {
	t.Helper()
	eb := decode[ingest.ErrorBody](t, b)
	if st != status || eb.Code != code || eb.Error == "" || (fields != nil && !slices.Equal(eb.Fields, fields)) {
		t.Errorf("%s: %d %s, want %d %s fields %v", what, st, b, status, code, fields)
	}
}

func TestSubscribeAndDelete(t *testing.T) {
	e := start(t)
	ws, key := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	st, b := e.subscribe(t, key, "CONTACT_CREATED", "https://8.8.8.8/hooks/contacts")
	s1 := decode[sub](t, b)
	if st != 201 || s1.ID == "" || s1.Event != "CONTACT_CREATED" || s1.TargetURL != "https://8.8.8.8/hooks/contacts" || s1.CreatedAt == "" {
		t.Fatalf("subscribe: %d %s", st, b)
	}
	// The same event and URL again: the existing subscription, 200.
	st, b = e.subscribe(t, key, "CONTACT_CREATED", "  https://8.8.8.8/hooks/contacts ")
	if again := decode[sub](t, b); st != 200 || again.ID != s1.ID || again.CreatedAt != s1.CreatedAt {
		t.Fatalf("subscribe again: %d %s, want 200 with id %s", st, b, s1.ID)
	}
	// Another event to the same URL is another subscription.
	st, b = e.subscribe(t, key, "EMAIL_BOUNCED", "https://8.8.8.8/hooks/contacts")
	s2 := decode[sub](t, b)
	if st != 201 || s2.ID == s1.ID {
		t.Fatalf("second event: %d %s", st, b)
	}
	if n := e.count(t, ws); n != 2 {
		t.Fatalf("%d subscriptions stored, want 2", n)
	}
	st, b = e.h.Do("DELETE", "/api/v1/webhooks/"+s1.ID, key, nil)
	if d := decode[sub](t, b); st != 200 || !d.Deleted || d.ID != s1.ID || d.Event != "CONTACT_CREATED" {
		t.Fatalf("delete: %d %s", st, b)
	}
	st, b = e.h.Do("DELETE", "/api/v1/webhooks/"+s1.ID, key, nil)
	wantError(t, "second delete", st, b, 404, "not_found")
	st, b = e.h.Do("DELETE", "/api/v1/webhooks/"+schemas.NewID(), key, nil)
	wantError(t, "unknown id", st, b, 404, "not_found")
	// Subscribing again after a delete makes a new one.
	st, b = e.subscribe(t, key, "CONTACT_CREATED", "https://8.8.8.8/hooks/contacts")
	if s3 := decode[sub](t, b); st != 201 || s3.ID == s1.ID {
		t.Fatalf("re-subscribe: %d %s", st, b)
	}
	if n := e.count(t, ws); n != 2 {
		t.Fatalf("%d subscriptions stored, want 2", n)
	}
}

func TestWorkspaceIsolation(t *testing.T) {
	e := start(t)
	wsA, keyA := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	wsB, keyB := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	_, b := e.subscribe(t, keyA, "EVENT_RECORDED", "https://1.1.1.1/in")
	a := decode[sub](t, b)
	// B neither sees nor deletes A's subscription.
	st, b := e.h.Do("DELETE", "/api/v1/webhooks/"+a.ID, keyB, nil)
	wantError(t, "delete of another workspace's id", st, b, 404, "not_found")
	if n := e.count(t, wsA); n != 1 {
		t.Fatalf("A has %d subscriptions after B's delete, want 1", n)
	}
	// B's subscription to the same event and URL is its own.
	st, b = e.subscribe(t, keyB, "EVENT_RECORDED", "https://1.1.1.1/in")
	if bs := decode[sub](t, b); st != 201 || bs.ID == a.ID {
		t.Fatalf("B subscribes the same: %d %s", st, b)
	}
	if st, _ := e.h.Do("DELETE", "/api/v1/webhooks/"+a.ID, keyA, nil); st != 200 {
		t.Fatalf("A deletes its own: %d", st)
	}
	if e.count(t, wsA) != 0 || e.count(t, wsB) != 1 {
		t.Fatalf("after A's delete: A %d, B %d", e.count(t, wsA), e.count(t, wsB))
	}
}

func TestSubscribeRefusals(t *testing.T) {
	e := start(t)
	e.dns.Set("inside.example.com", webhooktest.Addrs("10.0.0.7"))
	e.dns.Set("meta.example.com", webhooktest.Addrs("93.184.216.34", "169.254.169.254"))
	ws, key := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{RateMultiplier: 10})
	ok := "https://8.8.8.8/hook"
	cases := []struct {
		name   string
		body   any
		code   string
		fields []string
	}{
		{"unknown event", map[string]any{"event": "CONTACT_EXPLODED", "targetUrl": ok}, "unknown_event", []string{"event"}},
		{"lower-case event", map[string]any{"event": "contact_created", "targetUrl": ok}, "unknown_event", []string{"event"}},
		{"no event", map[string]any{"targetUrl": ok}, "validation_error", []string{"event"}},
		{"event null", map[string]any{"event": nil, "targetUrl": ok}, "validation_error", []string{"event"}},
		{"event number", map[string]any{"event": 5, "targetUrl": ok}, "validation_error", []string{"event"}},
		{"no targetUrl", map[string]any{"event": "CONTACT_CREATED"}, "validation_error", []string{"targetUrl"}},
		{"targetUrl object", map[string]any{"event": "CONTACT_CREATED", "targetUrl": map[string]any{}}, "validation_error", []string{"targetUrl"}},
		{"relative", map[string]any{"event": "CONTACT_CREATED", "targetUrl": "/hook"}, "invalid_url", []string{"targetUrl"}},
		{"ftp", map[string]any{"event": "CONTACT_CREATED", "targetUrl": "ftp://8.8.8.8/"}, "invalid_url", []string{"targetUrl"}},
		{"no such host", map[string]any{"event": "CONTACT_CREATED", "targetUrl": "https://nowhere.example.com/"}, "invalid_url", []string{"targetUrl"}},
		{"credentials", map[string]any{"event": "CONTACT_CREATED", "targetUrl": "https://user:pw@8.8.8.8/"}, "url_credentials", []string{"targetUrl"}},
		{"resolves private", map[string]any{"event": "CONTACT_CREATED", "targetUrl": "https://inside.example.com/"}, "private_target", []string{"targetUrl"}},
		{"one address private", map[string]any{"event": "CONTACT_CREATED", "targetUrl": "https://meta.example.com/"}, "private_target", []string{"targetUrl"}},
		{"both wrong", map[string]any{"event": "NOPE", "targetUrl": "https://u:p@8.8.8.8/"}, "validation_error", []string{"event", "targetUrl"}},
		{"array body", []any{1}, "validation_error", nil},
		{"empty object", map[string]any{}, "validation_error", []string{"event", "targetUrl"}},
	}
	for _, c := range cases {
		st, b := e.h.Do("POST", "/api/v1/webhooks/subscribe", key, c.body)
		wantError(t, c.name, st, b, 400, c.code, c.fields...)
	}
	for _, u := range webhooktest.PrivateSpellings {
		st, b := e.subscribe(t, key, "CONTACT_CREATED", u)
		wantError(t, u, st, b, 400, "private_target", "targetUrl")
	}
	if n := e.count(t, ws); n != 0 {
		t.Fatalf("%d subscriptions stored by refused calls", n)
	}
}

// TestSubscribeRebinding: a name that answers a public address when
// subscribing is accepted; when it later answers 127.0.0.1, the delivery
// client's connection is refused.
func TestSubscribeRebinding(t *testing.T) {
	e := start(t)
	rcv := webhooktest.NewReceiver(t, false, nil)
	e.dns.Set("rebind.example.com", webhooktest.Addrs("93.184.216.34"), webhooktest.Addrs("127.0.0.1"))
	_, key := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	url := "http://rebind.example.com:" + rcv.Port() + "/hook"
	if st, b := e.subscribe(t, key, "CONTACT_CREATED", url); st != 201 {
		t.Fatalf("subscribe: %d %s", st, b)
	}
	if _, err := get(e.g.Client(webhook.ClientConfig{}), url); !errors.Is(err, webhook.ErrPrivateAddress) {
		t.Fatalf("delivery to the rebound name: %v", err)
	}
	if rcv.Hits.Load() != 0 {
		t.Fatal("the loopback receiver was reached")
	}
}

func TestEventsCatalogue(t *testing.T) {
	events := start(t).listEvents(t)
	byName := map[string]bool{}
	for _, ev := range events {
		if schema := decode[map[string]any](t, ev.DataSchema); ev.Description == "" || schema["type"] != "object" {
			t.Errorf("%s: description %q, schema %v", ev.Event, ev.Description, schema)
		}
		byName[ev.Event] = true
	}
	for _, w := range schemas.WebhookEvents() {
		if !byName[w.Name] {
			t.Errorf("%s missing from GET /v1/webhooks/events", w.Name)
		}
	}
	if len(events) != len(schemas.WebhookEvents()) || len(events) < 14 {
		t.Errorf("%d event types listed", len(events))
	}
}

func TestScopeAndRateLimit(t *testing.T) {
	e := start(t)
	_, narrow := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{Scopes: []string{auth.ScopeContactsWrite}})
	for _, c := range [][2]string{{"POST", "/api/v1/webhooks/subscribe"}, {"DELETE", "/api/v1/webhooks/x"}, {"GET", "/api/v1/webhooks/events"}} {
		st, b := e.h.Do(c[0], c[1], narrow, map[string]any{"event": "CONTACT_CREATED", "targetUrl": "https://8.8.8.8/"})
		eb := decode[ingest.ErrorBody](t, b)
		if st != 403 || eb.Code != "insufficient_scope" || eb.RequiredScope != auth.ScopeWebhooksManage {
			t.Errorf("%s %s with contacts:write: %d %s", c[0], c[1], st, b)
		}
		if st, _ := e.h.Do(c[0], c[1], "", nil); st != 401 {
			t.Errorf("%s %s without a key: %d", c[0], c[1], st)
		}
	}
	_, scoped := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{Scopes: []string{auth.ScopeWebhooksManage}})
	if st, b := e.subscribe(t, scoped, "CONTACT_CREATED", "https://8.8.8.8/"); st != 201 {
		t.Fatalf("webhooks:manage key: %d %s", st, b)
	}
	// 60 per minute on each endpoint, counted separately.
	ingesttest.AwayFromMinuteEnd(t, 20e9)
	for i := 0; i < webhooks.Limit; i++ {
		if st, b := e.h.Do("GET", "/api/v1/webhooks/events", scoped, nil); st != 200 {
			t.Fatalf("call %d: %d %s", i+1, st, b)
		}
	}
	st, b := e.h.Do("GET", "/api/v1/webhooks/events", scoped, nil)
	if eb := decode[ingest.ErrorBody](t, b); st != 429 || eb.Error == "" {
		t.Fatalf("call 61: %d %s", st, b)
	}
	if st, b := e.h.Do("DELETE", "/api/v1/webhooks/"+schemas.NewID(), scoped, nil); st != 404 {
		t.Fatalf("DELETE after GET's limit: %d %s (its own counter)", st, b)
	}
}

// TestConcurrentSubscribes: equal subscribes racing create one
// subscription; every answer carries its id, exactly one of them 201.
func TestConcurrentSubscribes(t *testing.T) {
	e := start(t)
	ws, key := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	const n = 12
	type answer struct {
		st int
		b  []byte
	}
	out := make(chan answer, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, b := e.h.Do("POST", "/api/v1/webhooks/subscribe", key, map[string]any{"event": "EMAIL_DELIVERED", "targetUrl": "https://8.8.4.4/race"})
			out <- answer{st, b}
		}()
	}
	wg.Wait()
	close(out)
	created, ids := 0, map[string]bool{}
	for a := range out {
		if a.st == 201 {
			created++
		} else if a.st != 200 {
			t.Fatalf("answer %d %s", a.st, a.b)
		}
		ids[decode[sub](t, a.b).ID] = true
	}
	if created != 1 || len(ids) != 1 || e.count(t, ws) != 1 {
		t.Fatalf("%d created, ids %v, %d stored; want one", created, ids, e.count(t, ws))
	}
}

// TestNoInventedSubscriptionLimits: the spec caps neither the number of a
// workspace's subscriptions nor a target URL's length. 120 subscriptions
// (across the rate limit's minute, so the limiter is widened) and a 10,000
// byte URL are stored, and subscribing that long URL again finds it.
func TestNoInventedSubscriptionLimits(t *testing.T) {
	dns := webhooktest.StartDNS(t)
	g := webhook.NewGuard(webhook.GuardConfig{Resolver: dns.Resolver()})
	h := ingesttest.Start(t, webhooks.Routes(webhooks.Deps{Store: webhooks.NewStore(stack.PG(t)), Guard: g})...)
	e := &env{h: h, dns: dns, g: g}
	ws, key := h.NewWorkspace(t, ingesttest.WorkspaceOpts{RateMultiplier: 100})
	for i := 0; i < 120; i++ {
		if st, b := e.subscribe(t, key, "CONTACT_CREATED", fmt.Sprintf("https://8.8.8.8/hook/%d", i)); st != 201 {
			t.Fatalf("subscription %d: %d %s", i, st, b)
		}
	}
	long := "https://8.8.8.8/" + strings.Repeat("a", 10000)
	st, b := e.subscribe(t, key, "CONTACT_UPDATED", long)
	if st != 201 {
		t.Fatalf("10,000-byte URL: %d %.200s", st, b)
	}
	if st, b2 := e.subscribe(t, key, "CONTACT_UPDATED", long); st != 200 || idOf(t, b) != idOf(t, b2) {
		t.Fatalf("the long URL again: %d, ids %s / %s", st, idOf(t, b), idOf(t, b2))
	}
	if n := e.count(t, ws); n != 121 {
		t.Fatalf("%d stored, want 121", n)
	}
}

// idOf returns the id of a subscribe answer.
func idOf(t *testing.T, b []byte) string {
	t.Helper()
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.ID == "" {
		t.Fatalf("no id in %.200s: %v", b, err)
	}
	return v.ID
}

// get POSTs {} to url with c and returns the status code.
func get(c *fasthttp.Client, url string) (int, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url)
	req.Header.SetMethod("POST")
	req.SetBodyString(`{}`)
	err := c.DoTimeout(req, resp, 5*time.Second)
	return resp.StatusCode(), err
}
