package ingest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sendstream/ingest"
	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

// testRoutes are feature-like routes used to exercise the server's checks.
type testRoutes struct {
	calls atomic.Int64
}

func (tr *testRoutes) routes() []ingest.Route {
	echo := func(c *ingest.Call) ingest.Result {
		tr.calls.Add(1)
		env := schemas.Envelope{ID: schemas.ChildID(c.RequestID, "test.echoed.v1", 0), Workspace: c.Principal.Workspace,
			Type: "test.echoed.v1", Key: c.Principal.Workspace, OccurredAt: time.Now().UTC(), Payload: json.RawMessage(`{}`)}
		res := ingest.OK(200, map[string]any{"ok": true, "accessToken": "should-not-be-logged", "id": c.Params["id"]})
		res.Publish = []ingest.Message{{Topic: schemas.TopicEvents, Env: env}}
		res.Produced = schemas.Produced{EventIDs: []string{env.ID}, Recipient: "a@example.com", ExternalID: "ext-1"}
		return res
	}
	return []ingest.Route{
		{Method: "POST", Path: "/api/v1/test/{id}/echo", Credential: ingest.CredKey, Scope: "events:write", ScopeInError: true, Limit: 60, Logged: true, Handle: echo},
		{Method: "POST", Path: "/api/v1/test/noscope", Credential: ingest.CredKey, Scope: "transactional:write", ScopeInError: false, Limit: 100, Logged: true, Handle: echo},
		{Method: "POST", Path: "/api/public/test", Credential: ingest.CredKeyOrTracking, Scope: "events:write", Limit: 100, Logged: true, CORS: true, Handle: echo},
	}
}

func errBody(t *testing.T, b []byte) ingest.ErrorBody {
	t.Helper()
	var e ingest.ErrorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
		t.Fatalf("not a spec 7.1 error body: %s (%v)", b, err)
	}
	return e
}

func TestOpenAPIDocumentIsValid31(t *testing.T) {
	if errs := ingesttest.ValidateDocument(); len(errs) > 0 {
		t.Fatalf("OpenAPI document invalid:\n%s", strings.Join(errs, "\n"))
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	h := ingesttest.StartWith(t, ingesttest.Options{Config: ingest.Config{MetricsToken: "metrics-secret"}})
	for _, p := range []string{"/healthz", "/readyz"} {
		st, b := h.Do("GET", p, "", nil)
		if st != 200 || !bytes.Contains(b, []byte(`"status":"ok"`)) {
			t.Fatalf("%s: %d %s", p, st, b)
		}
	}
	h.Do("GET", "/api/v1/me", "", nil)
	st, b := h.Do("GET", "/metrics", "metrics-secret", nil)
	if st != 200 || !bytes.Contains(b, []byte(`sendstream_http_requests_total{method="GET",route="/api/v1/me",status="401"} 1`)) {
		t.Fatalf("/metrics: %d\n%s", st, b)
	}
}

func TestMeAndOpenAPI(t *testing.T) {
	h := ingesttest.Start(t)
	ws, key := h.NewWorkspace(t, ingesttest.WorkspaceOpts{Name: "Acme", Plan: "pro"})
	st, b := h.Do("GET", "/api/v1/me", key, nil)
	if st != 200 {
		t.Fatalf("me: %d %s", st, b)
	}
	var me ingest.Me
	_ = json.Unmarshal(b, &me)
	if me.Workspace.ID != ws || me.Workspace.Name != "Acme" || me.Workspace.Plan != "pro" || me.Key.Kind != "api_key" || !me.Key.FullAccess {
		t.Fatalf("me: %s", b)
	}
	// The record carries the JSON answer as JSON (schemas.Body), byte for byte.
	var payload []byte
	for _, e := range h.Consume(t, schemas.TopicRequestLog) {
		if e.Workspace == ws {
			payload = e.Payload
		}
	}
	if !bytes.Contains(payload, append([]byte(`"responseBody":`), b...)) {
		t.Fatalf("me's record does not hold the answer %s as JSON: %s", b, payload)
	}
	if !bytes.Contains(b, []byte(`"scopes":[],"fullAccess":true`)) {
		t.Fatalf("a full-access key's scopes are not an empty list: %s", b)
	}
	_, scoped := h.NewWorkspace(t, ingesttest.WorkspaceOpts{Scopes: []string{"contacts:read"}})
	if st, b := h.Do("GET", "/api/v1/me", scoped, nil); st != 200 || !bytes.Contains(b, []byte(`"scopes":["contacts:read"],"fullAccess":false`)) {
		t.Fatalf("me with a scoped key: %d %s", st, b)
	}
	st, b = h.Do("GET", "/api/v1/openapi.json", scoped, nil)
	if st != 200 || !bytes.Contains(b, []byte(`"openapi":"3.1.0"`)) || !bytes.Contains(b, []byte(h.URL+"/api")) {
		t.Fatalf("openapi.json with a scoped key: %d %.200s", st, b)
	}
	if st, _ := h.Do("GET", "/api/v1/openapi.json", "", nil); st != 401 {
		t.Fatalf("openapi.json without a key: %d", st)
	}
}

func TestAuthenticationFailuresAre401AndNotLogged(t *testing.T) {
	tr := &testRoutes{}
	h := ingesttest.StartWith(t, ingesttest.Options{Config: ingest.Config{KeyCacheTTL: 300 * time.Millisecond}}, tr.routes()...)
	ctx := context.Background()
	ws, key := h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	past := time.Now().Add(-time.Minute)
	_, expired, err := h.Store.CreateAPIKey(ctx, ws, "old", nil, &past)
	if err != nil {
		t.Fatal(err)
	}
	soon := time.Now().Add(1500 * time.Millisecond)
	_, expiring, _ := h.Store.CreateAPIKey(ctx, ws, "soon", nil, &soon)
	delID, deleted, _ := h.Store.CreateAPIKey(ctx, ws, "del", nil, nil)
	_, tracking, _ := h.Store.CreateTrackingToken(ctx, ws, nil)

	if st, b := h.Do("GET", "/api/v1/me", deleted, nil); st != 200 {
		t.Fatalf("fresh key: %d %s", st, b)
	}
	if st, _ := h.Do("GET", "/api/v1/me", expiring, nil); st != 200 {
		t.Fatalf("key before expiry: %d", st)
	}
	if err := h.Store.DeleteAPIKey(ctx, ws, delID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1600 * time.Millisecond) // past the cache TTL and the expiry

	unknown := "ss_live_" + strings.Repeat("A", 40)
	cases := map[string]string{
		"missing": "", "malformed": "not-a-key", "unknown": unknown, "expired": expired,
		"expired since cached": expiring, "deleted": deleted, "tracking token on /v1": tracking,
	}
	for name, k := range cases {
		st, b := h.Do("GET", "/api/v1/me", k, nil)
		if st != 401 {
			t.Errorf("%s: %d %s, want 401", name, st, b)
			continue
		}
		if e := errBody(t, b); e.Code != "unauthorized" {
			t.Errorf("%s: code %q", name, e.Code)
		}
	}
	req, _ := http.NewRequest("GET", h.URL+"/api/v1/me", nil)
	req.Header.Set("Authorization", "Basic "+key)
	if resp, _ := h.DoRequest(req); resp.StatusCode != 401 {
		t.Errorf("Basic auth: %d", resp.StatusCode)
	}

	// A marker that IS logged (an authenticated 403), published in the background like any non-2xx record.
	_, scoped := h.NewWorkspace(t, ingesttest.WorkspaceOpts{Scopes: []string{"contacts:read"}})
	if st, b := h.Do("POST", "/api/v1/test/x/echo", scoped, `{}`); st != 403 {
		t.Fatalf("marker: %d %s", st, b)
	}
	h.ConsumeUntil(t, schemas.TopicRequestLog, 10*time.Second, func(envs []schemas.Envelope) bool {
		for _, e := range envs {
			if bytes.Contains(e.Payload, []byte(`"status":403`)) {
				return true
			}
		}
		return false
	})
	logs := h.Consume(t, schemas.TopicRequestLog)
	for _, e := range logs {
		var rl schemas.RequestLog
		_ = json.Unmarshal(e.Payload, &rl)
		if rl.Status == 401 {
			t.Fatalf("a 401 was logged: %s", e.Payload)
		}
	}
	if len(logs) != 3 { // two 200s of /me and the 403 marker
		t.Fatalf("%d request-log records, want 3", len(logs))
	}
}

func TestScopesSuspensionAndErrors(t *testing.T) {
	tr := &testRoutes{}
	h := ingesttest.StartWith(t, ingesttest.Options{Config: ingest.Config{KeyCacheTTL: 200 * time.Millisecond}}, tr.routes()...)
	ws, full := h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	_, scoped, _ := h.Store.CreateAPIKey(context.Background(), ws, "ro", []string{"contacts:read"}, nil)

	st, b := h.Do("POST", "/api/v1/test/x/echo", scoped, `{"a":1}`)
	if e := errBody(t, b); st != 403 || e.Code != "insufficient_scope" || e.RequiredScope != "events:write" {
		t.Fatalf("scoped /v1: %d %s", st, b)
	}
	st, b = h.Do("POST", "/api/v1/test/noscope", scoped, `{"a":1}`)
	if e := errBody(t, b); st != 403 || e.Code != "insufficient_scope" || bytes.Contains(b, []byte("requiredScope")) {
		t.Fatalf("scoped, ScopeInError false: %d %s", st, b)
	}
	_, withScope, _ := h.Store.CreateAPIKey(context.Background(), ws, "ev", []string{"events:write"}, nil)
	if st, b := h.Do("POST", "/api/v1/test/x/echo", withScope, `{"a":1}`); st != 200 {
		t.Fatalf("key with the scope: %d %s", st, b)
	}

	// Errors of the HTTP tier.
	st, b = h.Do("GET", "/api/v1/nope", full, nil)
	if e := errBody(t, b); st != 404 || e.Code != "not_found" {
		t.Fatalf("unknown route: %d %s", st, b)
	}
	req, _ := http.NewRequest("DELETE", h.URL+"/api/v1/me", nil)
	resp, b := h.DoRequest(req)
	if e := errBody(t, b); resp.StatusCode != 405 || e.Code != "method_not_allowed" || resp.Header.Get("Allow") != "GET" {
		t.Fatalf("wrong method: %d %s allow=%q", resp.StatusCode, b, resp.Header.Get("Allow"))
	}
	st, b = h.Do("POST", "/api/v1/test/x/echo", full, `{"a":`)
	if e := errBody(t, b); st != 400 || e.Code != "invalid_json" {
		t.Fatalf("bad JSON: %d %s", st, b)
	}
	for ct, want := range map[string]int{"text/xml": 415, "application/x-www-form-urlencoded": 415, "application/json; charset=utf-8": 200, "": 200, "application/merge-patch+json": 200} {
		req, _ := http.NewRequest("POST", h.URL+"/api/v1/test/x/echo", strings.NewReader(`{"a":1}`))
		req.Header.Set("Authorization", "Bearer "+full)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, b := h.DoRequest(req)
		if resp.StatusCode != want {
			t.Fatalf("Content-Type %q: %d %s, want %d", ct, resp.StatusCode, b, want)
		}
		if want == 415 && errBody(t, b).Code != "unsupported_media_type" {
			t.Fatalf("415 code: %s", b)
		}
	}

	// CORS only where the route asks for it; text/plain accepted there.
	req, _ = http.NewRequest("OPTIONS", h.URL+"/api/public/test", nil)
	req.Header.Set("Origin", "https://shop.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	resp, _ = h.DoRequest(req)
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "authorization") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	req, _ = http.NewRequest("POST", h.URL+"/api/public/test", strings.NewReader(`{"a":1}`))
	req.Header.Set("Authorization", "Bearer "+full)
	req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
	resp, b = h.DoRequest(req)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("CORS POST: %d %s %v", resp.StatusCode, b, resp.Header)
	}
	req, _ = http.NewRequest("OPTIONS", h.URL+"/api/v1/me", nil)
	if resp, _ := h.DoRequest(req); resp.StatusCode != 405 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("OPTIONS on a non-CORS route: %d %v", resp.StatusCode, resp.Header)
	}

	// Suspension, then resumption, within the cache TTL.
	if err := h.Store.SetSuspended(context.Background(), ws, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	st, b = h.Do("GET", "/api/v1/me", full, nil)
	if e := errBody(t, b); st != 403 || e.Code != "TEAM_SUSPENDED" {
		t.Fatalf("suspended: %d %s", st, b)
	}
	_ = h.Store.SetSuspended(context.Background(), ws, false)
	time.Sleep(300 * time.Millisecond)
	if st, b := h.Do("GET", "/api/v1/me", full, nil); st != 200 {
		t.Fatalf("resumed: %d %s", st, b)
	}
}

func TestPayloadTooLargeProcessesNothing(t *testing.T) {
	tr := &testRoutes{}
	h := ingesttest.Start(t, tr.routes()...)
	_, key := h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	big := `{"pad":"` + strings.Repeat("x", 64<<10) + `"}`
	st, b := h.Do("POST", "/api/public/test", key, big)
	if e := errBody(t, b); st != 413 || e.Code != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("64 KB+ on /public: %d %s", st, b)
	}
	// Over 16 MB: refused from the Content-Length, before the body is read
	// (a raw connection, since the server answers and closes mid-upload).
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/test/x/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", key, 17<<20)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("16 MB+ on /v1: %v", err)
	}
	b, _ = io.ReadAll(resp.Body)
	if e := errBody(t, b); resp.StatusCode != 413 || e.Code != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("16 MB+ on /v1: %d %s", resp.StatusCode, b)
	}
	if tr.calls.Load() != 0 {
		t.Fatalf("handler ran %d times for refused bodies", tr.calls.Load())
	}
	if envs := h.Consume(t, schemas.TopicEvents); len(envs) != 0 {
		t.Fatalf("%d envelopes published for refused bodies", len(envs))
	}
	// Just under the cap is processed.
	ok := `{"pad":"` + strings.Repeat("x", 64<<10-20) + `"}`
	if st, b := h.Do("POST", "/api/public/test", key, ok); st != 200 {
		t.Fatalf("under the cap: %d %s", st, b)
	}
}

func TestRateLimitExactAcrossTwoServers(t *testing.T) {
	h := ingesttest.Start(t)
	h2 := h.Second(t, ingesttest.Options{})
	_, k1 := h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	_, k2 := h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	ingesttest.AwayFromMinuteEnd(t, 20*time.Second)

	// One server: 60 pass, the 61st is refused.
	for i := 1; i <= 60; i++ {
		if st, b := h.Do("GET", "/api/v1/me", k1, nil); st != 200 {
			t.Fatalf("call %d: %d %s", i, st, b)
		}
	}
	req, _ := http.NewRequest("GET", h.URL+"/api/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+k1)
	resp, b := h.DoRequest(req)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("61st call: %d %v", resp.StatusCode, resp.Header)
	}
	var only map[string]any
	if err := json.Unmarshal(b, &only); err != nil || len(only) != 1 || only["error"] == nil {
		t.Fatalf("429 body must carry only error: %s", b)
	}

	// Two servers sharing Postgres, calls alternating.
	for i := 1; i <= 60; i++ {
		hh := []*ingesttest.Harness{h, h2}[i%2]
		if st, b := hh.Do("GET", "/api/v1/me", k2, nil); st != 200 {
			t.Fatalf("alternating call %d: %d %s", i, st, b)
		}
	}
	for _, hh := range []*ingesttest.Harness{h, h2} {
		if st, _ := hh.Do("GET", "/api/v1/me", k2, nil); st != 429 {
			t.Fatalf("61st call across two servers: %d", st)
		}
	}
}

func TestRequestLogRecordRedacted(t *testing.T) {
	tr := &testRoutes{}
	h := ingesttest.StartWith(t, ingesttest.Options{Config: ingest.Config{RequestLogBodyCap: 4096}}, tr.routes()...)
	ws, key := h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	body := `{"email":"a@example.com","nested":{"list":[{"Password":"hunter2","keep":"me"}],"deeper":{"api_key":"k","x":{"clientSecret":"s"}}},` +
		`"attachments":[{"filename":"a.pdf","contentType":"application/pdf","content":"aGVsbG8="}]}`
	req, _ := http.NewRequest("POST", h.URL+"/api/v1/test/abc/echo", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ingest-test/1")
	resp, b := h.DoRequest(req)
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"id":"abc"`)) {
		t.Fatalf("echo: %d %s", resp.StatusCode, b)
	}
	reqID := resp.Header.Get("X-Request-Id")
	if reqID == "" {
		t.Fatal("no X-Request-Id on a logged call")
	}
	// The 2xx's effects and its record are acked before the answer.
	if envs := h.Consume(t, schemas.TopicEvents); len(envs) != 1 || envs[0].Workspace != ws {
		t.Fatalf("published events: %+v", envs)
	}
	var rec *schemas.Envelope
	for _, e := range h.Consume(t, schemas.TopicRequestLog) {
		if e.ID == reqID {
			rec = &e
		}
	}
	if rec == nil || rec.Type != schemas.TypeRequestLogged || rec.Key != ws || rec.Workspace != ws {
		t.Fatalf("request-log envelope %s missing or wrong: %+v", reqID, rec)
	}
	var rl schemas.RequestLog
	if err := json.Unmarshal(rec.Payload, &rl); err != nil {
		t.Fatal(err)
	}
	// A compact body, redacted, still travels as JSON (schemas.Body).
	if !bytes.Contains(rec.Payload, []byte(`"requestBody":{"email":"a@example.com","nested":`)) {
		t.Fatalf("compact request body not carried as JSON: %s", rec.Payload)
	}
	for _, leaked := range []string{"hunter2", `"k"`, `"s"`, "aGVsbG8=", "should-not-be-logged"} {
		if strings.Contains(string(rl.RequestBody+rl.ResponseBody), leaked) {
			t.Fatalf("secret %s leaked into the request log:\n%s\n%s", leaked, rl.RequestBody, rl.ResponseBody)
		}
	}
	for _, want := range []string{`"Password":"[REDACTED]"`, `"keep":"me"`, `"api_key":"[REDACTED]"`, `"clientSecret":"[REDACTED]"`, `"content":"[OMITTED 5 bytes]"`, `"filename":"a.pdf"`} {
		if !strings.Contains(string(rl.RequestBody), want) {
			t.Fatalf("request body %s lacks %s", rl.RequestBody, want)
		}
	}
	if !strings.Contains(string(rl.ResponseBody), `"accessToken":"[REDACTED]"`) {
		t.Fatalf("response body not redacted: %s", rl.ResponseBody)
	}
	if rl.Method != "POST" || rl.Path != "/api/v1/test/abc/echo" || rl.Status != 200 || rl.KeyKind != "api_key" || rl.KeyID == "" ||
		rl.UserAgent != "ingest-test/1" || rl.IP != "127.0.0.1" || rl.Truncated || len(rl.Produced.EventIDs) != 1 ||
		rl.Produced.Recipient != "a@example.com" || rl.Produced.ExternalID != "ext-1" || rl.DurationUS <= 0 {
		t.Fatalf("request-log record: %+v", rl)
	}

	// A body with whitespace between tokens travels as a string, unchanged.
	spaced := `{"email": "b@example.com", "n": [1, 2]}`
	resp1, _ := h.DoRequest(mustReq(t, "POST", h.URL+"/api/v1/test/s/echo", key, spaced))
	id1 := resp1.Header.Get("X-Request-Id")
	found := false
	for _, e := range h.Consume(t, schemas.TopicRequestLog) {
		if e.ID != id1 {
			continue
		}
		found = true
		var rl schemas.RequestLog
		_ = json.Unmarshal(e.Payload, &rl)
		if string(rl.RequestBody) != spaced || !bytes.Contains(e.Payload, []byte(`"requestBody":"{\"email\": `)) {
			t.Fatalf("spaced body: %q in %s", rl.RequestBody, e.Payload)
		}
	}
	if !found {
		t.Fatal("record of the spaced call not found")
	}

	// Bodies over the cap are cut after redaction and marked truncated.
	long := `{"password":"p","pad":"` + strings.Repeat("y", 5000) + `"}`
	resp2, _ := h.DoRequest(mustReq(t, "POST", h.URL+"/api/v1/test/t/echo", key, long))
	id2 := resp2.Header.Get("X-Request-Id")
	for _, e := range h.Consume(t, schemas.TopicRequestLog) {
		if e.ID != id2 {
			continue
		}
		var rl schemas.RequestLog
		_ = json.Unmarshal(e.Payload, &rl)
		if !rl.Truncated || len(rl.RequestBody) != 4096 || !strings.HasPrefix(string(rl.RequestBody), `{"password":"[REDACTED]"`) {
			t.Fatalf("truncated record: truncated=%v len=%d %.60s", rl.Truncated, len(rl.RequestBody), rl.RequestBody)
		}
		return
	}
	t.Fatal("record of the long call not found")
}

func mustReq(t *testing.T, method, url, key, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	return req
}
