package clickhouse_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/deploy/stack"
	chsink "sendstream/sinks/clickhouse"
)

// requestLogDB returns a connection to a fresh, migrated database on the
// stack's ClickHouse, dropped when the test ends.
func requestLogDB(t *testing.T) driver.Conn {
	t.Helper()
	env := stack.ForTest(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	db := "test_requests_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := chsink.Open(ctx, env.ClickHouseAddr, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db); err != nil {
			t.Errorf("drop %s: %v", db, err)
		}
		conn.Close()
	})
	if err := chsink.Migrate(ctx, conn, db); err != nil {
		t.Fatal(err)
	}
	return conn
}

type logRow struct {
	id, workspace string
	at            time.Time
	status        uint16
	messageIDs    []string
}

func insertLog(t *testing.T, conn driver.Conn, rows ...logRow) {
	t.Helper()
	batch, err := conn.PrepareBatch(context.Background(), `INSERT INTO request_log (id, workspace, at, method, path,
		status, duration_us, key_id, key_kind, request_body, response_body, truncated, message_ids, event_ids,
		journey_run_ids, contact_ids, recipient, external_id, ip, user_agent, received)`)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Close()
	for _, r := range rows {
		if r.messageIDs == nil {
			r.messageIDs = []string{}
		}
		err := batch.Append(r.id, r.workspace, r.at, "POST", "/v1/events", r.status, uint64(2500), "key_1", "api_key",
			`{"a":1}`, `{"ok":true}`, uint8(1), r.messageIDs, []string{"evt_1"}, []string{}, []string{"con_1"},
			"a@example.com", "ext-1", "127.0.0.1", "ua/1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

func ids(rows []chsink.RequestRow) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.ID)
	}
	return out
}

func TestQueryRequests(t *testing.T) {
	conn := requestLogDB(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	insertLog(t, conn,
		logRow{id: "r1", workspace: "w1", at: base, status: 202, messageIDs: []string{"m1"}},
		logRow{id: "r2", workspace: "w1", at: base.Add(time.Minute), status: 422},
		logRow{id: "r3", workspace: "w1", at: base.Add(2 * time.Minute), status: 200},
		logRow{id: "x1", workspace: "w2", at: base.Add(3 * time.Minute), status: 200},
	)
	insertLog(t, conn, logRow{id: "r2", workspace: "w1", at: base.Add(time.Minute), status: 422}) // redelivered

	cases := []struct {
		name  string
		ws    string
		since time.Time
		limit int
		want  []string
	}{
		{"newest first, each id once, own workspace only", "w1", time.Time{}, 0, []string{"r3", "r2", "r1"}},
		{"since is inclusive", "w1", base.Add(time.Minute), 10, []string{"r3", "r2"}},
		{"limit counts distinct ids", "w1", time.Time{}, 2, []string{"r3", "r2"}},
		{"other workspace", "w2", time.Time{}, 10, []string{"x1"}},
		{"unknown workspace is empty, not nil", "w3", time.Time{}, 10, []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := chsink.QueryRequests(ctx, conn, c.ws, c.since, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !reflect.DeepEqual(ids(got), c.want) {
				t.Fatalf("ids = %v, want %v", ids(got), c.want)
			}
		})
	}

	for _, limit := range []int{-1, chsink.MaxRequestsLimit + 1} {
		if _, err := chsink.QueryRequests(ctx, conn, "w1", time.Time{}, limit); err == nil {
			t.Errorf("limit %d accepted", limit)
		}
	}
	if _, err := chsink.QueryRequests(ctx, conn, "", time.Time{}, 10); err == nil {
		t.Error("empty workspace accepted")
	}
}

func TestRequestRowJSON(t *testing.T) {
	conn := requestLogDB(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	insertLog(t, conn, logRow{id: "r1", workspace: "w1", at: at, status: 202, messageIDs: []string{"m1"}})
	got, err := chsink.QueryRequests(context.Background(), conn, "w1", time.Time{}, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("QueryRequests = %v, %v", got, err)
	}
	raw, err := json.Marshal(got[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"id": "r1", "at": "2026-03-01T12:00:00Z", "method": "POST", "path": "/v1/events", "status": 202.0,
		"durationMs": 2.5, "keyId": "key_1", "keyKind": "api_key", "appId": "", "memberId": "", "requestBody": `{"a":1}`,
		"responseBody": `{"ok":true}`, "truncated": true, "messageIds": []any{"m1"}, "eventIds": []any{"evt_1"},
		"journeyRunIds": []any{}, "contactIds": []any{"con_1"}, "recipient": "a@example.com",
		"externalId": "ext-1", "ip": "127.0.0.1", "userAgent": "ua/1",
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("JSON:\n got %v\nwant %v", m, want)
	}
}

// An OAuth call's row carries its app and member (migration 0070 adds the
// columns); QueryRequests reads them back.
func TestRequestRowAppAndMember(t *testing.T) {
	conn := requestLogDB(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO request_log (id, workspace, at, method, path, status, key_id, key_kind, app_id, member_id)`)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Close()
	if err := batch.Append("r1", "w1", at, "GET", "/v1/contacts", uint16(200), "conn_1", "oauth", "app_1", "mem_1"); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	got, err := chsink.QueryRequests(ctx, conn, "w1", time.Time{}, 1)
	if err != nil || len(got) != 1 || got[0].KeyKind != "oauth" || got[0].AppID != "app_1" || got[0].MemberID != "mem_1" {
		t.Fatalf("QueryRequests = %+v, %v", got, err)
	}
}
