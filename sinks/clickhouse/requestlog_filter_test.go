package clickhouse_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	chsink "sendstream/sinks/clickhouse"
)

// TestFindRequestsFilters: each filter of the dashboard's request log
// (exact status, status class, path substring, key) selects its rows, they
// combine, and a filter value that looks like SQL is only a value.
func TestFindRequestsFilters(t *testing.T) {
	conn := requestLogDB(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO request_log (id, workspace, at, method, path,
		status, duration_us, key_id, key_kind, request_body, response_body, truncated, message_ids, event_ids,
		journey_run_ids, contact_ids, recipient, external_id, ip, user_agent, received)`)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range []struct {
		id, path, key string
		status        uint16
	}{
		{"a", "/v1/contacts", "k1", 200},
		{"b", "/v1/contacts/c_1", "k2", 404},
		{"c", "/v1/events", "k1", 422},
		{"d", "/v1/transactional/send", "k2", 201},
		{"e", "/v1/events", "k2", 503},
	} {
		err := batch.Append(r.id, "w1", base.Add(time.Duration(i)*time.Minute), "POST", r.path, r.status, uint64(1000), r.key,
			"api_key", "{}", "{}", uint8(0), []string{}, []string{}, []string{}, []string{}, "", "", "", "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		f    chsink.RequestFilter
		want []string
	}{
		{"none", chsink.RequestFilter{}, []string{"e", "d", "c", "b", "a"}},
		{"status", chsink.RequestFilter{Status: 422}, []string{"c"}},
		{"class 4xx", chsink.RequestFilter{StatusClass: 4}, []string{"c", "b"}},
		{"class 2xx", chsink.RequestFilter{StatusClass: 2}, []string{"d", "a"}},
		{"path substring", chsink.RequestFilter{Path: "/contacts"}, []string{"b", "a"}},
		{"key", chsink.RequestFilter{KeyID: "k2"}, []string{"e", "d", "b"}},
		{"combined", chsink.RequestFilter{KeyID: "k2", Path: "events", StatusClass: 5}, []string{"e"}},
		{"since and limit", chsink.RequestFilter{Since: base.Add(time.Minute), Limit: 2}, []string{"e", "d"}},
		{"SQL-looking path is a value", chsink.RequestFilter{Path: "' OR 1=1 --"}, []string{}},
		{"SQL-looking key is a value", chsink.RequestFilter{KeyID: "k1' OR '1'='1"}, []string{}},
	}
	for _, c := range cases {
		got, err := chsink.FindRequests(ctx, conn, "w1", c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(ids(got), c.want) {
			t.Errorf("%s: ids %v, want %v", c.name, ids(got), c.want)
		}
	}
	for _, f := range []chsink.RequestFilter{{Status: 99}, {Status: 600}, {StatusClass: 6}, {StatusClass: -1}} {
		if _, err := chsink.FindRequests(ctx, conn, "w1", f); err == nil {
			t.Errorf("filter %+v accepted", f)
		}
	}
}
