package ingest

import "testing"

func TestRouter(t *testing.T) {
	var r router
	add := func(m, p string, cors bool) {
		t.Helper()
		if err := r.add(&route{Route: Route{Method: m, Path: p, CORS: cors}}); err != nil {
			t.Fatal(err)
		}
	}
	add("GET", "/api/v1/contacts", false)
	add("POST", "/api/v1/contacts", false)
	add("GET", "/api/v1/contacts/search", false)
	add("POST", "/api/v1/lists/{id}/subscribe", false)
	add("GET", "/api/v1/transactional/{messageId}/status", false)
	add("DELETE", "/api/v1/webhooks/{id}", false)
	add("GET", "/api/v1/webhooks/events", false)
	add("POST", "/api/public/events", true)
	add("GET", "/healthz", false)

	var spans [maxParams]paramSpan
	cases := []struct {
		path   string
		found  bool
		allow  string
		params string
	}{
		{"/api/v1/contacts", true, "GET, POST", ""},
		{"/api/v1/contacts/search", true, "GET", ""},
		{"/api/v1/lists/abc/subscribe", true, "POST", "abc"},
		{"/api/v1/transactional/m1/status", true, "GET", "m1"},
		{"/api/v1/webhooks/events", true, "GET", ""},
		{"/api/v1/webhooks/w9", true, "DELETE", "w9"},
		{"/api/public/events", true, "OPTIONS, POST", ""},
		{"/healthz", true, "GET", ""},
		{"/api/v1/contacts/", false, "", ""},
		{"/api/v1//contacts", false, "", ""},
		{"/api/v1/lists/abc", false, "", ""},
		{"/nope", false, "", ""},
		{"/", false, "", ""},
	}
	for _, c := range cases {
		n := r.match([]byte(c.path), &spans)
		if (n != nil) != c.found {
			t.Fatalf("%s: found=%v want %v", c.path, n != nil, c.found)
		}
		if n == nil {
			continue
		}
		if n.allow != c.allow {
			t.Errorf("%s: allow %q want %q", c.path, n.allow, c.allow)
		}
		if c.params != "" {
			if got := c.path[spans[0].start:spans[0].end]; got != c.params {
				t.Errorf("%s: param %q want %q", c.path, got, c.params)
			}
		}
	}
	if err := r.add(&route{Route: Route{Method: "GET", Path: "/api/v1/contacts"}}); err == nil {
		t.Fatal("duplicate route accepted")
	}
	if err := r.add(&route{Route: Route{Method: "GET", Path: "/api/v1/lists/{other}/x"}}); err == nil {
		t.Fatal("conflicting parameter names accepted")
	}
}

func BenchmarkRouterMatch(b *testing.B) {
	var r router
	for _, p := range []string{"/api/v1/me", "/api/v1/contacts", "/api/v1/lists/{id}/subscribe", "/api/v1/events"} {
		_ = r.add(&route{Route: Route{Method: "GET", Path: p}})
	}
	var spans [maxParams]paramSpan
	path := []byte("/api/v1/lists/123/subscribe")
	b.ReportAllocs()
	for b.Loop() {
		if r.match(path, &spans) == nil {
			b.Fatal("no match")
		}
	}
}
