package transactional_test

import (
	"fmt"
	"net/url"
	"testing"

	"sendstream/ingest/ingesttest"
)

// TestListAndStatus covers spec 4.4: filters, limit bounds, newest first,
// the before cursor and nextBefore, and lookups by id and ext:<externalId>.
func TestListAndStatus(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	_, otherKey := e.workspace(ingesttest.WorkspaceOpts{})
	var ids []string
	for i := 0; i < 7; i++ {
		to := "a@example.test"
		if i%2 == 1 {
			to = "b@example.test"
		}
		st, ans := e.send(key, map[string]any{"to": to, "subject": "s", "htmlContent": "h", "externalId": fmt.Sprint("ext-", i)})
		if st != 201 {
			t.Fatal(st, ans)
		}
		ids = append(ids, ans["id"].(string))
	}
	// One failed message for the status filter.
	e.exec("UPDATE transactional_messages SET status = 'failed', failed_at = now(), failure_reason = 'test' WHERE id = $1", ids[2])

	list := func(q url.Values) (int, map[string]any) {
		t.Helper()
		return e.call("GET", "/api/v1/transactional?"+q.Encode(), key, nil)
	}
	idsOf := func(m map[string]any) []string {
		var out []string
		for _, x := range m["messages"].([]any) {
			out = append(out, x.(map[string]any)["id"].(string))
		}
		return out
	}
	st, all := list(url.Values{})
	if st != 200 || len(idsOf(all)) != 7 || all["nextBefore"] != nil {
		t.Fatalf("default list: %d %v", st, all)
	}
	for i, id := range idsOf(all) {
		if id != ids[6-i] {
			t.Fatalf("not newest first: %v", idsOf(all))
		}
	}
	// Pages of 3: full pages carry nextBefore, the short last one null.
	var paged []string
	q := url.Values{"limit": {"3"}}
	for page := 0; ; page++ {
		st, p := list(q)
		if st != 200 {
			t.Fatalf("page %d: %d %v", page, st, p)
		}
		paged = append(paged, idsOf(p)...)
		if p["nextBefore"] == nil {
			if len(idsOf(p)) == 3 {
				t.Error("a full page without nextBefore")
			}
			break
		}
		q.Set("before", p["nextBefore"].(string))
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	if fmt.Sprint(paged) != fmt.Sprint(idsOf(all)) {
		t.Errorf("pages %v, all %v", paged, idsOf(all))
	}
	// An exactly full last page: nextBefore set, then an empty page.
	st, p := list(url.Values{"limit": {"7"}})
	if st != 200 || p["nextBefore"] != ids[0] {
		t.Errorf("limit 7: %v", p["nextBefore"])
	}
	st, p = list(url.Values{"limit": {"7"}, "before": {ids[0]}})
	if st != 200 || len(idsOf(p)) != 0 || p["nextBefore"] != nil {
		t.Errorf("after the last: %d %v", st, p)
	}
	// Filters.
	if _, p := list(url.Values{"to": {"B@example.test"}}); len(idsOf(p)) != 3 {
		t.Errorf("to filter: %v", idsOf(p))
	}
	if _, p := list(url.Values{"status": {"failed"}}); fmt.Sprint(idsOf(p)) != fmt.Sprint([]string{ids[2]}) {
		t.Errorf("status filter: %v", idsOf(p))
	}
	// bounced, complained and failed are read through their own index (the
	// generated problem column); the rest by reading newest first. Both
	// follow a status that changes again.
	e.exec("UPDATE transactional_messages SET status = 'bounced' WHERE id = ANY($1)", []string{ids[3], ids[5]})
	e.exec("UPDATE transactional_messages SET status = 'sent' WHERE id = $1", ids[6])
	for status, want := range map[string][]string{
		"bounced": {ids[5], ids[3]}, "complained": nil, "failed": {ids[2]},
		"sent": {ids[6]}, "queued": {ids[4], ids[1], ids[0]}, "delivered": nil,
	} {
		if st, p := list(url.Values{"status": {status}}); st != 200 || fmt.Sprint(idsOf(p)) != fmt.Sprint(want) {
			t.Errorf("status %s: %d %v, want %v", status, st, idsOf(p), want)
		}
	}
	if _, p := list(url.Values{"status": {"bounced"}, "limit": {"1"}}); fmt.Sprint(idsOf(p)) != fmt.Sprint([]string{ids[5]}) || p["nextBefore"] != ids[5] {
		t.Errorf("bounced, first page of 1: %v %v", idsOf(p), p["nextBefore"])
	}
	if _, p := list(url.Values{"status": {"bounced"}, "limit": {"1"}, "before": {ids[5]}}); fmt.Sprint(idsOf(p)) != fmt.Sprint([]string{ids[3]}) {
		t.Errorf("bounced, second page of 1: %v", idsOf(p))
	}
	if _, p := list(url.Values{"status": {"bounced"}, "to": {"b@example.test"}, "externalId": {"ext-5"}}); fmt.Sprint(idsOf(p)) != fmt.Sprint([]string{ids[5]}) {
		t.Errorf("bounced with to and externalId: %v", idsOf(p))
	}
	e.exec("UPDATE transactional_messages SET status = 'complained' WHERE id = $1", ids[3])
	if _, p := list(url.Values{"status": {"complained"}}); fmt.Sprint(idsOf(p)) != fmt.Sprint([]string{ids[3]}) {
		t.Errorf("complained after bounced: %v", idsOf(p))
	}
	if _, p := list(url.Values{"status": {"bounced"}}); fmt.Sprint(idsOf(p)) != fmt.Sprint([]string{ids[5]}) {
		t.Errorf("bounced after one complained: %v", idsOf(p))
	}
	if st, p := e.call("GET", "/api/v1/transactional?status=bounced", otherKey, nil); st != 200 || len(idsOf(p)) != 0 {
		t.Errorf("another workspace's bounced: %d %v", st, p)
	}
	e.exec("UPDATE transactional_messages SET status = 'queued' WHERE id = ANY($1)", []string{ids[3], ids[5], ids[6]})
	if _, p := list(url.Values{"externalId": {"ext-4"}}); fmt.Sprint(idsOf(p)) != fmt.Sprint([]string{ids[4]}) {
		t.Errorf("externalId filter: %v", idsOf(p))
	}
	if _, p := list(url.Values{"status": {"queued"}, "to": {"a@example.test"}}); len(idsOf(p)) != 3 {
		t.Errorf("combined filters: %v", idsOf(p))
	}
	// Bad input.
	for _, bad := range []url.Values{{"limit": {"0"}}, {"limit": {"101"}}, {"limit": {"x"}}, {"status": {"lost"}}, {"before": {"not-a-message"}}} {
		if st, p := list(bad); st != 400 || p["fields"] == nil {
			t.Errorf("%v: %d %v", bad, st, p)
		}
	}
	// Another workspace sees none of them, and its cursor cannot be used.
	if st, p := e.call("GET", "/api/v1/transactional", otherKey, nil); st != 200 || len(idsOf(p)) != 0 {
		t.Errorf("other workspace: %v", p)
	}
	if st, _ := e.call("GET", "/api/v1/transactional?before="+ids[3], otherKey, nil); st != 400 {
		t.Errorf("foreign cursor: %d", st)
	}

	// Status by id and by ext:, with its fields.
	st, s := e.status(key, ids[2])
	if st != 200 || s["status"] != "failed" || s["failureReason"] != "test" || s["externalId"] != "ext-2" || s["to"] != "a@example.test" {
		t.Errorf("status: %d %v", st, s)
	}
	if evs := s["events"].([]any); len(evs) != 2 || evs[1].(map[string]any)["detail"] != "test" {
		t.Errorf("events: %v", s["events"])
	}
	if st, s := e.status(key, "ext:ext-5"); st != 200 || s["id"] != ids[5] {
		t.Errorf("status by ext: %d %v", st, s)
	}
	for _, ref := range []string{"nope", "ext:nope", "ext:", ids[0] + "x"} {
		if st, s := e.status(key, ref); st != 404 || s["code"] != "not_found" {
			t.Errorf("status of %q: %d %v", ref, st, s)
		}
	}
	if st, _ := e.status(otherKey, ids[0]); st != 404 {
		t.Errorf("another workspace's message: %d", st)
	}
	_ = ws
}
