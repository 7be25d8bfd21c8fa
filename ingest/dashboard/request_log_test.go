package dashboard_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sendstream/ingest/ingesttest"
)

var requestRowRe = regexp.MustCompile(`<tr data-request-id="([^"]+)" data-status="(\d+)">`)

// shownRequests are the ids and statuses of the page's rows, in order.
func shownRequests(body string) (ids, statuses []string) {
	for _, m := range requestRowRe.FindAllStringSubmatch(body, -1) {
		ids, statuses = append(ids, m[1]), append(statuses, m[2])
	}
	return ids, statuses
}

// TestRequestLogPage seeds the request log with real API calls through two
// keys (the requestlog stage writes them to ClickHouse) and reads them
// back through the page's filters.
func TestRequestLogPage(t *testing.T) {
	p := startPages(t)
	ws, keyA := p.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	_, keyB, err := p.h.Store.CreateAPIKey(context.Background(), ws, "reporting", []string{"contacts:read"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, otherKey := p.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	if st := p.apiCall("GET", "/api/v1/contacts", otherKey, nil); st != 200 {
		t.Fatalf("other workspace's call: %d", st)
	}
	calls := []struct {
		method, path, key string
		body              any
		want              int
	}{
		{"GET", "/api/v1/contacts", keyA, nil, 200},
		{"POST", "/api/v1/contacts", keyA, map[string]any{"email": "not an address", "password": "hunter2-secret"}, 400},
		{"GET", "/api/v1/lists", keyB, nil, 200},
		{"POST", "/api/v1/contacts", keyB, map[string]any{"email": "ada@example.com"}, 403},
	}
	for _, c := range calls {
		if st := p.apiCall(c.method, c.path, c.key, c.body); st != c.want {
			t.Fatalf("%s %s: %d, want %d", c.method, c.path, st, c.want)
		}
	}
	rows := p.waitRequests(ws, len(calls))
	p.waitRequests(other, 1)
	keys, err := p.h.Store.ListAPIKeys(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	var idB, hintA string
	for _, k := range keys {
		if k.Name == "reporting" {
			idB = k.ID
		} else {
			hintA = k.Hint
		}
	}

	_, _, cookie := p.member(ws, "custom", "api_keys.manage")
	resp, body := p.do("GET", "/logs/requests", cookie, nil, nil)
	ids, statuses := shownRequests(body)
	want := []string{}
	for _, r := range rows {
		want = append(want, r.ID)
	}
	if resp.StatusCode != 200 || !slices.Equal(ids, want) {
		t.Fatalf("unfiltered: %d, rows %v, want newest first %v", resp.StatusCode, ids, want)
	}
	if !slices.Equal(statuses, []string{"403", "200", "400", "200"}) {
		t.Errorf("statuses newest first: %v", statuses)
	}
	for _, s := range []string{"/api/v1/lists", "POST", hintA, "reporting", " ms</td>", "<details>", "[REDACTED]", `not an address`} {
		if !strings.Contains(body, s) {
			t.Errorf("the page lacks %q", s)
		}
	}
	if strings.Contains(body, "hunter2-secret") {
		t.Error("the page shows a password the request log should have redacted")
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP %q: want script-src 'self' only", csp)
	}

	for _, c := range []struct {
		query    string
		statuses []string
	}{
		{"?status=4xx", []string{"403", "400"}},
		{"?status=200", []string{"200", "200"}},
		{"?path=%2Flists", []string{"200"}},
		{"?key=" + idB, []string{"403", "200"}},
		{"?key=" + idB + "&status=4XX&path=contacts", []string{"403"}},
		{"?path=%27+OR+1%3D1+--", nil},
	} {
		resp, body := p.do("GET", "/logs/requests"+c.query, cookie, nil, nil)
		if _, st := shownRequests(body); resp.StatusCode != 200 || !slices.Equal(st, c.statuses) {
			t.Errorf("GET /logs/requests%s: %d, statuses %v, want %v", c.query, resp.StatusCode, st, c.statuses)
		}
		if c.statuses == nil && !strings.Contains(body, "No request matches") {
			t.Errorf("GET /logs/requests%s: no 'No request matches'", c.query)
		}
	}
	if _, body := p.do("GET", "/logs/requests?key="+idB, cookie, nil, nil); !strings.Contains(body, `<option value="`+idB+`" selected>`) {
		t.Error("the key filter does not keep the chosen key selected")
	}
	resp, body = p.do("GET", "/logs/requests?status=fourhundred", cookie, nil, nil)
	if ids, _ := shownRequests(body); resp.StatusCode != 400 || len(ids) != 0 || !strings.Contains(body, "such as 422 or a class such as 4xx") || !strings.Contains(body, `value="fourhundred"`) {
		t.Errorf("a bad status filter: %d with %d rows, want 400 explaining it and keeping the input", resp.StatusCode, len(ids))
	}
	resp, body = p.do("GET", "/logs/requests?status=fourhundred", cookie, nil, map[string]string{"HX-Request": "true"})
	if resp.StatusCode != 200 || !strings.Contains(body, `id="filter-error"`) {
		t.Errorf("a bad status filter from htmx: %d, want 200 with the error in the swapped part", resp.StatusCode)
	}

	_, _, support := p.member(ws, "support", "")
	if resp, body := p.do("GET", "/logs/requests", support, nil, nil); resp.StatusCode != 200 || len(requestRowRe.FindAllString(body, -1)) != len(calls) {
		t.Errorf("support staff: %d, want 200 with the log", resp.StatusCode)
	}
	for _, c := range []struct{ role, perms string }{{"member", ""}, {"custom", "webhooks.manage"}} {
		_, _, cookie := p.member(ws, c.role, c.perms)
		if resp, body := p.do("GET", "/logs/requests", cookie, nil, nil); resp.StatusCode != 403 || !strings.Contains(body, "api_keys.manage") || requestRowRe.MatchString(body) {
			t.Errorf("%s %q: %d, want 403 naming api_keys.manage without rows", c.role, c.perms, resp.StatusCode)
		}
	}
}
