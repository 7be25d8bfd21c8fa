package ingest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"sendstream/deploy/stack"
	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/contacts"
	"sendstream/ingest/events"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/ratelimit"
	"sendstream/ingest/tracking"
	"sendstream/ingest/transactional"
	"sendstream/schemas"
)

// features is a server with every feature's routes, wired as serve wires
// them, on the real Postgres and broker.
type features struct {
	*ingesttest.Harness
	contacts *contacts.Store
}

func startFeatures(t *testing.T, opt ingesttest.Options) *features {
	t.Helper()
	pg := stack.PG(t)
	cs := contacts.NewStore(pg)
	t.Cleanup(cs.Close)
	signer, err := contacts.NewSigner("test-secret-0123456789abcdef", 0)
	if err != nil {
		t.Fatal(err)
	}
	es, err := events.NewStore(pg, events.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var routes []ingest.Route
	routes = append(routes, contacts.Routes(contacts.Deps{Store: cs, Signer: signer, SiteURL: "http://site.invalid"})...)
	routes = append(routes, transactional.Routes(transactional.Deps{PG: pg, Contacts: cs, SiteURL: "http://site.invalid", Secret: "test-secret-0123456789abcdef"})...)
	routes = append(routes, events.Routes(events.Deps{Store: es})...)
	routes = append(routes, tracking.Routes(tracking.Deps{
		Auth: auth.NewCache(auth.NewStore(pg), auth.CacheConfig{}), Limiter: ratelimit.New(pg, ratelimit.Options{}),
	})...)
	return &features{Harness: ingesttest.StartWith(t, opt, routes...), contacts: cs}
}

// stored counts what a workspace holds in Postgres and on the pipeline's
// topics (the request log aside).
func (f *features) stored(t *testing.T, ws string) int {
	t.Helper()
	n := 0
	for _, table := range []string{"contacts", "memberships", "event_ledger", "transactional_messages"} {
		var c int
		if err := f.PG.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE workspace_id = $1", ws).Scan(&c); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		if c > 0 {
			t.Logf("%s holds %d rows of %s", table, c, ws)
		}
		n += c
	}
	for _, topic := range schemas.AllTopics {
		if topic == schemas.TopicRequestLog {
			continue
		}
		for _, e := range f.Consume(t, topic) {
			if e.Workspace == ws {
				t.Logf("%s holds %s of %s", topic, e.Type, ws)
				n++
			}
		}
	}
	return n
}

// healthy fails the test unless /healthz still answers.
func (f *features) healthy(t *testing.T) {
	t.Helper()
	if st, b := f.Do("GET", "/healthz", "", nil); st != 200 {
		t.Fatalf("/healthz: %d %s", st, b)
	}
}

func wantError(t *testing.T, name string, st int, b []byte, status int, code string, fields ...string) {
	t.Helper()
	e := errBody(t, b)
	if st != status || e.Code != code {
		t.Errorf("%s: %d %s, want %d %s", name, st, b, status, code)
		return
	}
	if len(fields) > 0 && strings.Join(e.Fields, ",") != strings.Join(fields, ",") {
		t.Errorf("%s: fields %q, want %q", name, e.Fields, fields)
	}
}

// Defect 3: NUL (escaped), lone surrogates and invalid UTF-8 in any string
// of any JSON body answer 400 invalid_text naming the path, before a
// handler runs, so nothing is stored or published (they answered 500 or
// 503 before).
func TestBadTextInBodiesIsRefusedBeforeAnyHandler(t *testing.T) {
	f := startFeatures(t, ingesttest.Options{})
	ws, key := f.NewWorkspace(t, ingesttest.WorkspaceOpts{Plan: "pro"})
	l, err := f.contacts.CreateList(context.Background(), ws, "News", false)
	if err != nil {
		t.Fatal(err)
	}
	const nul, lone = `a\u0000b`, `a\ud800b`
	send := func(extra string) string {
		return `{"to":"to@example.com","subject":"s","htmlContent":"<p>x</p>"` + extra + `}`
	}
	cases := []struct {
		name, path, body string
		field            string
	}{
		{"contact firstName", "/api/v1/contacts", `{"email":"a@example.com","firstName":"` + nul + `"}`, "firstName"},
		{"contact country", "/api/v1/contacts", `{"email":"a@example.com","country":"` + nul + `"}`, "country"},
		{"contact language", "/api/v1/contacts", `{"email":"a@example.com","language":"` + lone + `"}`, "language"},
		{"contact source", "/api/v1/contacts", `{"email":"a@example.com","source":"` + nul + `"}`, "source"},
		{"metadata value", "/api/v1/contacts", `{"email":"a@example.com","metadata":{"note":"` + nul + `"}}`, "metadata.note"},
		{"metadata key", "/api/v1/contacts", `{"email":"a@example.com","metadata":{"` + nul + `":"x"}}`, "metadata.a\uFFFDb"},
		{"custom field", "/api/v1/contacts", `{"email":"a@example.com","customFields":{"plan":"` + nul + `"}}`, "customFields.plan"},
		{"raw invalid UTF-8", "/api/v1/contacts", "{\"email\":\"a@example.com\",\"firstName\":\"a\xffb\"}", "firstName"},
		{"surrogate escape of a low half", "/api/v1/contacts", `{"email":"a@example.com","lastName":"\udc00"}`, "lastName"},
		{"subscribe", "/api/v1/lists/" + l.ID + "/subscribe", `{"email":"a@example.com","firstName":"` + nul + `"}`, "firstName"},
		{"unsubscribe", "/api/v1/lists/" + l.ID + "/unsubscribe", `{"email":"a` + `\u0000` + `@example.com"}`, "email"},
		{"event name", "/api/v1/events", `{"email":"a@example.com","name":"` + nul + `"}`, "name"},
		{"event contactId", "/api/v1/events", `{"contactId":"` + nul + `","name":"x"}`, "contactId"},
		{"event property", "/api/v1/events", `{"email":"a@example.com","name":"x","properties":{"p":["ok","` + lone + `"]}}`, "properties.p[1]"},
		{"import row", "/api/v1/events/import", `{"events":[{"email":"a@example.com","name":"x"},{"email":"a@example.com","name":"` + nul + `"}]}`, "events[1].name"},
		{"public event", "/api/public/events", `{"name":"` + nul + `"}`, "name"},
		{"send contact.firstName", "/api/v1/transactional/send", send(`,"contact":{"firstName":"` + nul + `"}`), "contact.firstName"},
		{"send sendPolicy", "/api/v1/transactional/send", send(`,"sendPolicy":"` + nul + `"`), "sendPolicy"},
		{"send externalId", "/api/v1/transactional/send", send(`,"externalId":"` + nul + `"`), "externalId"},
		{"send data", "/api/v1/transactional/send", send(`,"data":{"items":[{"n":"` + nul + `"}]}`), "data.items[0].n"},
		{"validate", "/api/v1/transactional/validate", send(`,"externalId":"` + lone + `"`), "externalId"},
	}
	for _, c := range cases {
		st, b := f.Do("POST", c.path, key, c.body)
		wantError(t, c.name, st, b, 400, "invalid_text", c.field)
	}
	if n := f.stored(t, ws); n != 0 {
		t.Errorf("refused bodies stored or published %d things", n)
	}
	f.healthy(t)

	// Valid text passes the rule: a surrogate pair, an escaped backslash
	// before "u0000", and raw UTF-8.
	st, b := f.Do("POST", "/api/v1/contacts", key, `{"email":"ok@example.com","firstName":"J\u00f6 \ud83d\ude00 \\u0000 日本"}`)
	if st != 201 {
		t.Fatalf("valid text: %d %s", st, b)
	}
}

// The hosted form reads its own body (form or JSON) and applies the same
// rule through ingest.CheckBodyText.
func TestBadTextInFormFields(t *testing.T) {
	f := startFeatures(t, ingesttest.Options{})
	ws, _ := f.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	l, err := f.contacts.CreateList(context.Background(), ws, "News", false)
	if err != nil {
		t.Fatal(err)
	}
	post := func(ct, body string) (int, []byte) {
		req, _ := http.NewRequest("POST", f.URL+"/forms/"+l.ID, strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		resp, b := f.DoRequest(req)
		return resp.StatusCode, b
	}
	const form = "application/x-www-form-urlencoded"
	for name, c := range map[string]struct{ ct, body, field string }{
		"form NUL":            {form, "email=a%40example.com&firstName=a%00b", "firstName"},
		"form invalid UTF-8":  {form, "email=a%40example.com%FF&firstName=x", "email"},
		"form bad escape":     {form, "email=a%40example.com&firstName=%ZZ", "firstName"},
		"form trailing %":     {form, "email=a%40example.com&firstName=x%", "firstName"},
		"json NUL":            {"application/json", `{"email":"a@example.com","firstName":"a\u0000b"}`, "firstName"},
		"json lone surrogate": {"application/json", `{"email":"a@example.com","firstName":"\ud800"}`, "firstName"},
	} {
		st, b := post(c.ct, c.body)
		wantError(t, name, st, b, 400, "invalid_text", c.field)
	}
	if n := f.stored(t, ws); n != 0 {
		t.Errorf("refused forms stored or published %d things", n)
	}
	if st, b := post(form, "email=ok%40example.com&firstName=J%C3%B6"); st != 200 {
		t.Fatalf("valid form: %d %s", st, b)
	}
}

// Defect 4: query parameters that decode to NUL or invalid UTF-8, or are
// not well-formed percent-encoding, answer 400 naming the parameter; path
// ids that hold such bytes answer 404 (all answered 500 before).
func TestBadQueryAndPathText(t *testing.T) {
	f := startFeatures(t, ingesttest.Options{})
	ws, key := f.NewWorkspace(t, ingesttest.WorkspaceOpts{Plan: "pro"})
	l, err := f.contacts.CreateList(context.Background(), ws, "News", false)
	if err != nil {
		t.Fatal(err)
	}
	get := func(method, uri string) (int, []byte) {
		return rawURI(t, f.Harness, method, uri, key)
	}
	for _, c := range []struct{ path, field string }{
		{"/api/v1/transactional?before=%00", "before"},
		{"/api/v1/transactional?before=%FF", "before"},
		{"/api/v1/transactional?to=%00", "to"},
		{"/api/v1/transactional?to=a%ZZ", "to"},
		{"/api/v1/transactional?externalId=%", "externalId"},
		{"/api/v1/transactional?limit=5&status=%C3", "status"},
		{"/api/v1/contacts?listId=%FF", "listId"},
		{"/api/v1/contacts?status=a%00", "status"},
		{"/api/v1/contacts?page=1&li%00mit=5", "li\uFFFDmit"},
		{"/api/v1/contacts/search?email=a%40b.c%ED%A0%80", "email"},
		{"/api/v1/lists?x=%00", "x"},
		{"/api/v1/me?%FF", "\uFFFD"},
		{"/api/v1/transactional/abc/status?x=%ZZ", "x"},
	} {
		st, b := get("GET", c.path)
		wantError(t, c.path, st, b, 400, "invalid_text", c.field)
	}
	for _, id := range []string{"%00", "%FF", "a%00b", "%ZZ", "a%", "%C3%28"} {
		for _, p := range []struct{ method, path string }{
			{"GET", "/api/v1/transactional/" + id + "/status"},
			{"POST", "/api/v1/lists/" + id + "/subscribe"},
			{"POST", "/api/v1/lists/" + id + "/unsubscribe"},
		} {
			st, b := get(p.method, p.path)
			wantError(t, p.method+" "+p.path, st, b, 404, "not_found")
		}
	}
	// Well-formed escapes of valid text still work.
	if st, b := get("GET", "/api/v1/transactional?to=a%2Bb%40example.com&externalId=J%C3%B6"); st != 200 {
		t.Fatalf("valid escapes: %d %s", st, b)
	}
	if st, b := get("GET", "/api/v1/contacts?listId="+l.ID); st != 200 {
		t.Fatalf("listId: %d %s", st, b)
	}
	if n := f.stored(t, ws); n != 0 {
		t.Errorf("%d things stored", n)
	}
	f.healthy(t)
}

// rawURI sends method uri with the path and query exactly as written (Go's
// client would re-encode a malformed escape) and returns the answer,
// checked against the OpenAPI document.
func rawURI(t *testing.T, h *ingesttest.Harness, method, uri, key string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, h.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	path, query, _ := strings.Cut(uri, "?")
	req.URL.Opaque, req.URL.Path, req.URL.RawQuery = path, path, query
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, b := h.DoRequest(req)
	return resp.StatusCode, b
}
