package dashboard_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

// TestBrowserFiltersRequestLogWithHTMX loads the request log in headless
// Chromium under the page's CSP (script-src 'self'): htmx runs, filtering
// by status swaps the table in place (no page load: a value set on window
// survives) and pushes the filter into the address; the message log's
// uPlot chart draws.
func TestBrowserFiltersRequestLogWithHTMX(t *testing.T) {
	p := startPages(t)
	ws, key := p.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	for _, c := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"GET", "/api/v1/contacts", nil, 200},
		{"POST", "/api/v1/contacts", map[string]any{"email": "not an address"}, 400},
		{"GET", "/api/v1/lists", nil, 200},
	} {
		if st := p.apiCall(c.method, c.path, key, c.body); st != c.want {
			t.Fatalf("%s %s: %d, want %d", c.method, c.path, st, c.want)
		}
	}
	p.waitRequests(ws, 3)
	email := "b" + strings.ToLower(schemas.NewID()) + "@example.com"
	adminMember(t, ws, email, "owner", "")

	pg := signedInPage(t, p.h.URL, "/logs/requests", "/logs/requests", email)
	statuses := func() []string {
		t.Helper()
		var s []string
		pg.Eval(t, `[...document.querySelectorAll("tr[data-request-id]")].map(r => r.dataset.status)`, &s)
		return s
	}
	if got := statuses(); !slices.Equal(got, []string{"200", "400", "200"}) {
		t.Fatalf("the log shows statuses %v, want 200 400 200", got)
	}
	var htmx string
	pg.Eval(t, `typeof htmx`, &htmx)
	if htmx != "object" {
		t.Fatalf("htmx is %q on the page: the script did not run under the CSP", htmx)
	}
	pg.Eval(t, `window.stayed = "yes"; document.getElementById("f-status").value = "4xx";
		document.querySelector('#request-filter button[type=submit]').click(); true`, nil)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(statuses(), []string{"400"}) {
		if time.Now().After(deadline) {
			t.Fatalf("after filtering by 4xx the table shows %v, want [400]", statuses())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var stayed, search string
	pg.Eval(t, `window.stayed || "reloaded"`, &stayed)
	pg.Eval(t, `location.search`, &search)
	if stayed != "yes" || !strings.Contains(search, "status=4xx") {
		t.Errorf("after the htmx filter: window %q, address %q; want no reload and the filter in the address", stayed, search)
	}

	pg.Navigate(t, p.h.URL+"/logs/messages")
	var drawn bool
	pg.Eval(t, `document.querySelector("#messages-chart canvas") !== null && document.getElementById("messages-chart").dataset.drawn === "true"`, &drawn)
	if !drawn {
		t.Error("the message log's uPlot chart did not draw")
	}
	if ex := pg.Exceptions(); len(ex) > 0 {
		t.Errorf("uncaught exceptions: %v", ex)
	}
}
