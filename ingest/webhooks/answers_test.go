package webhooks_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"sendstream/deploy/stack"
	"sendstream/ingest"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/webhooks"
	"sendstream/schemas"
	"sendstream/schemas/schemastest"
	"sendstream/sinks/webhook"
)

// TestEveryErrorAnswerIsDocumented makes each of the three webhooks
// endpoints give every error answer its code and the server's checks give
// it (issue 25 item 9) and asserts the status and code; the harness
// validates each answer against the OpenAPI document, so an answer the
// document does not list for that operation fails the test.
func TestEveryErrorAnswerIsDocumented(t *testing.T) {
	e := start(t)
	_, key := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{RateMultiplier: 10})
	big := bytes.Repeat([]byte(" "), ingest.CapV1+1)
	cases := []struct {
		name, method, path, ctype string
		body                      []byte
		status                    int
		code                      string
	}{
		{"subscribe: not JSON", "POST", "/api/v1/webhooks/subscribe", "application/json", []byte(`{"event":`), 400, "invalid_json"},
		{"subscribe: NUL in a string", "POST", "/api/v1/webhooks/subscribe", "application/json",
			[]byte(`{"event":"CONTACT_CREATED\u0000","targetUrl":"https://8.8.8.8/"}`), 400, "invalid_text"},
		{"subscribe: invalid UTF-8 in the query", "POST", "/api/v1/webhooks/subscribe?x=%FF", "application/json",
			[]byte(`{"event":"CONTACT_CREATED","targetUrl":"https://8.8.8.8/"}`), 400, "invalid_text"},
		{"subscribe: form body", "POST", "/api/v1/webhooks/subscribe", "application/x-www-form-urlencoded",
			[]byte(`event=CONTACT_CREATED`), 415, "unsupported_media_type"},
		{"subscribe: over the cap", "POST", "/api/v1/webhooks/subscribe", "application/json", big, 413, "PAYLOAD_TOO_LARGE"},
		{"delete: invalid UTF-8 in the id", "DELETE", "/api/v1/webhooks/%FF", "", nil, 404, "not_found"},
		{"delete: invalid UTF-8 in the query", "DELETE", "/api/v1/webhooks/x?x=%FF", "", nil, 400, "invalid_text"},
		{"delete: a body over the cap", "DELETE", "/api/v1/webhooks/x", "application/json", big, 413, "PAYLOAD_TOO_LARGE"},
		{"events: invalid UTF-8 in the query", "GET", "/api/v1/webhooks/events?x=%FF", "", nil, 400, "invalid_text"},
		{"events: a body over the cap", "GET", "/api/v1/webhooks/events", "application/json", big, 413, "PAYLOAD_TOO_LARGE"},
	}
	for _, c := range cases {
		req, err := http.NewRequest(c.method, e.h.URL+c.path, bytes.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		resp, b := e.h.DoRequest(req)
		eb := decode[ingest.ErrorBody](t, b)
		if resp.StatusCode != c.status || eb.Code != c.code || eb.Error == "" {
			t.Errorf("%s: %d %s, want %d %s", c.name, resp.StatusCode, trim(b), c.status, c.code)
		}
	}
}

// TestSubscribeWhenDNSFails: a target name whose lookup fails for a reason
// other than "no such host" answers the documented 503, storing nothing.
func TestSubscribeWhenDNSFails(t *testing.T) {
	down := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("the test's DNS server is down")
	}}
	g := webhook.NewGuard(webhook.GuardConfig{Resolver: down})
	h := ingesttest.Start(t, webhooks.Routes(webhooks.Deps{Store: webhooks.NewStore(stack.PG(t)), Guard: g})...)
	_, key := h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	st, b := h.Do("POST", "/api/v1/webhooks/subscribe", key, map[string]any{"event": "CONTACT_CREATED", "targetUrl": "https://hooks.example.com/"})
	if eb := decode[ingest.ErrorBody](t, b); st != 503 || eb.Code != "unavailable" {
		t.Errorf("subscribe while DNS fails: %d %s, want 503 unavailable", st, b)
	}
}

// TestEventsListMatchesDocument: GET /v1/webhooks/events over HTTP lists
// exactly the event types of the OpenAPI document's webhooks section, in
// the catalogue's order, each with the description and data schema the
// document gives that operation.
func TestEventsListMatchesDocument(t *testing.T) {
	events := start(t).listEvents(t)
	docHooks := schemastest.OpenAPIWebhooks(t)
	if len(events) != len(docHooks) {
		t.Errorf("GET /v1/webhooks/events lists %d types, the document's webhooks section %d", len(events), len(docHooks))
	}
	cat := schemas.WebhookEvents()
	for i, ev := range events {
		if i < len(cat) && cat[i].Name != ev.Event {
			t.Errorf("event %d is %s, the catalogue's is %s", i, ev.Event, cat[i].Name)
		}
		op, ok := docHooks[ev.Event]
		if !ok {
			t.Errorf("%s is listed but not in the document's webhooks section", ev.Event)
			continue
		}
		if !strings.HasPrefix(op.Description, ev.Description) {
			t.Errorf("%s: listed description %q; the document's starts %.80q", ev.Event, ev.Description, op.Description)
		}
		if a, b := schemastest.Canonical(t, ev.DataSchema), schemastest.Canonical(t, op.Data); a != b {
			t.Errorf("%s: listed data schema %s, the document's %s", ev.Event, a, b)
		}
	}
}

func trim(b []byte) string {
	s := string(b)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return strings.TrimSpace(s)
}
