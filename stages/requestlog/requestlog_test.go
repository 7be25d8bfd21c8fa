package requestlog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/pipeline"
	"sendstream/schemas"
	chsink "sendstream/sinks/clickhouse"
)

// newStage builds the stage on conn with a retention that never runs during
// the test (tests call DropExpired themselves).
func newStage(t *testing.T, conn driver.Conn) *Stage {
	t.Helper()
	cfg := DefaultConfig()
	cfg.RetentionDays = 36500 // the start-up pass must not touch test rows
	s, err := New(context.Background(), pipeline.Resources{ClickHouse: conn}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// The start-up retention pass queries request_log's parts: let it end
	// before a test renames or drops anything under it.
	select {
	case <-s.firstPass:
	case <-time.After(time.Minute):
		t.Fatal("the start-up retention pass did not end within a minute")
	}
	return s
}

func full(at time.Time, n int) schemas.RequestLog {
	return schemas.RequestLog{
		At: at, Method: "POST", Path: fmt.Sprintf("/v1/transactional/%d", n), Status: 200 + n,
		DurationUS: int64(1000*n + 234), KeyID: fmt.Sprintf("key_%d", n), KeyKind: "api_key",
		RequestBody: schemas.Body(fmt.Sprintf(`{"to":"u%d@example.com","password":"[redacted]"}`, n)), ResponseBody: `{"ok":true}`,
		Truncated: n%2 == 1,
		Produced: schemas.Produced{
			MessageIDs: []string{fmt.Sprintf("msg_%d", n), "msg_x"}, EventIDs: []string{fmt.Sprintf("evt_%d", n)},
			JourneyRunIDs: []string{fmt.Sprintf("run_%d", n)}, ContactIDs: []string{fmt.Sprintf("con_%d", n)},
			Recipient: fmt.Sprintf("u%d@example.com", n), ExternalID: fmt.Sprintf("ext-%d", n),
		},
		IP: "127.0.0.1", UserAgent: "sendstream-test/1",
	}
}

func handle(t *testing.T, s *Stage, envs ...schemas.Envelope) {
	t.Helper()
	for _, e := range envs {
		out, err := s.Handle(context.Background(), e)
		if err != nil {
			t.Fatalf("Handle %s: %v", e.ID, err)
		}
		if len(out) != 0 {
			t.Fatalf("Handle %s published %d envelopes, want none", e.ID, len(out))
		}
	}
}

func count(t *testing.T, conn driver.Conn, where string, args ...any) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM request_log WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFlushWritesEveryColumn(t *testing.T) {
	conn := testConn(t)
	s := newStage(t, conn)
	at := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	p1, p2 := full(at, 1), full(at.Add(time.Second), 2)
	p2.Produced = schemas.Produced{} // a call that produced nothing: empty arrays, empty strings
	before := time.Now().UTC().Truncate(time.Second)
	handle(t, s, envelope(t, "id-1", p1), envelope(t, "id-2", p2))
	if n := count(t, conn, "workspace = 'ws_1'"); n != 0 {
		t.Fatalf("%d rows written before Flush", n)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.buf.Len() != 0 {
		t.Fatalf("buffer holds %d rows after a successful Flush", s.buf.Len())
	}

	rows, err := conn.Query(context.Background(), `SELECT id, workspace, at, method, path, status, duration_us,
		key_id, key_kind, request_body, response_body, truncated, message_ids, event_ids, journey_run_ids,
		contact_ids, recipient, external_id, ip, user_agent, received FROM request_log ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.workspace, &r.at, &r.method, &r.path, &r.status, &r.durationUS,
			&r.keyID, &r.keyKind, &r.requestBody, &r.responseBody, &r.truncated, &r.messageIDs, &r.eventIDs,
			&r.journeyRunIDs, &r.contactIDs, &r.recipient, &r.externalID, &r.ip, &r.userAgent, &r.received); err != nil {
			t.Fatal(err)
		}
		r.at, r.received = r.at.UTC(), r.received.UTC()
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d rows, want 2", len(got))
	}
	for i, p := range []schemas.RequestLog{p1, p2} {
		g := got[i]
		if g.received.Before(before) || g.received.After(time.Now().Add(time.Second)) {
			t.Errorf("row %d received = %s, want about now", i, g.received)
		}
		want, err := decode(envelope(t, fmt.Sprintf("id-%d", i+1), p), g.received)
		if err != nil {
			t.Fatal(err)
		}
		if dump(g) != dump(want) {
			t.Errorf("row %d:\n got %s\nwant %s", i, dump(g), dump(want))
		}
	}
}

func TestRedeliveryIsOneRow(t *testing.T) {
	conn := testConn(t)
	at := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	env := envelope(t, "dup-1", full(at, 3))
	other := envelope(t, "dup-2", full(at, 4))

	// First delivery, then a redelivery after a restart (a new stage value)
	// in a later batch: two inserts of the same id.
	s1 := newStage(t, conn)
	handle(t, s1, env, other)
	if err := s1.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2 := newStage(t, conn)
	handle(t, s2, env)
	if err := s2.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	got, err := chsink.QueryRequests(context.Background(), conn, "ws_1", time.Time{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "dup-2" && got[1].ID != "dup-2" {
		t.Fatalf("query returned %d rows (%+v), want dup-1 and dup-2 once each", len(got), got)
	}
	if got[0].ID == got[1].ID {
		t.Fatalf("query returned %s twice", got[0].ID)
	}

	// The engine collapses the duplicate for good once parts merge.
	if err := conn.Exec(context.Background(), "OPTIMIZE TABLE request_log FINAL"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, "id = 'dup-1'"); n != 1 {
		t.Fatalf("after merge %d rows with id dup-1, want 1", n)
	}
}

func TestFailedFlushKeepsTheBuffer(t *testing.T) {
	conn := testConn(t)
	s := newStage(t, conn)
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Second)
	handle(t, s, envelope(t, "keep-1", full(at, 1)), envelope(t, "keep-2", full(at, 2)))

	if err := conn.Exec(ctx, "RENAME TABLE request_log TO request_log_away"); err != nil {
		t.Fatal(err)
	}
	err := s.Flush(ctx)
	if err2 := conn.Exec(ctx, "RENAME TABLE request_log_away TO request_log"); err2 != nil {
		t.Fatal(err2)
	}
	if err == nil {
		t.Fatal("Flush without a table succeeded")
	}
	if s.buf.Len() != 2 {
		t.Fatalf("failed Flush left %d rows buffered, want 2", s.buf.Len())
	}
	// The runner re-reads the uncommitted batch: redelivered rows replace,
	// not duplicate, the buffered ones.
	handle(t, s, envelope(t, "keep-1", full(at, 1)))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, "workspace = 'ws_1'"); n != 2 {
		t.Fatalf("%d rows after the retried Flush, want 2", n)
	}
}

func TestDropExpiredDropsOnlyOldPartitions(t *testing.T) {
	conn := testConn(t)
	s := newStage(t, conn)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	old := now.AddDate(0, 0, -100)
	edge := now.AddDate(0, 0, -89)
	handle(t, s, envelope(t, "old", full(old, 1)), envelope(t, "edge", full(edge, 2)), envelope(t, "new", full(now, 3)))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	dropped, err := DropExpired(ctx, conn, 90)
	if err != nil {
		t.Fatal(err)
	}
	var oldDay string // the partition id of old, by the server's time zone
	if err := conn.QueryRow(ctx, "SELECT toString(toYYYYMMDD(toDateTime(?)))", old.Unix()).Scan(&oldDay); err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 1 || dropped[0] != oldDay {
		t.Fatalf("dropped %v, want only partition %s", dropped, oldDay)
	}
	for id, want := range map[string]uint64{"old": 0, "edge": 1, "new": 1} {
		if n := count(t, conn, "id = ?", id); n != want {
			t.Errorf("%d rows with id %s after retention, want %d", n, id, want)
		}
	}
	// A second pass finds nothing more to drop.
	if again, err := DropExpired(ctx, conn, 90); err != nil || len(again) != 0 {
		t.Fatalf("second pass dropped %v (err %v), want nothing", again, err)
	}
}

func TestRetentionRunsWhenTheStageStarts(t *testing.T) {
	conn := testConn(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	w := newStage(t, conn)
	handle(t, w, envelope(t, "old", full(now.AddDate(0, 0, -100), 1)), envelope(t, "new", full(now, 2)))
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	s, err := New(ctx, pipeline.Resources{ClickHouse: conn}, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for count(t, conn, "id = 'old'") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the retention goroutine did not drop the 100-day-old partition within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, "id = 'new'"); n != 1 {
		t.Fatalf("retention removed the recent row (%d left)", n)
	}
}

func TestNewNeedsClickHouse(t *testing.T) {
	if _, err := New(context.Background(), pipeline.Resources{}, DefaultConfig()); err == nil {
		t.Fatal("New without ClickHouse succeeded")
	}
	bad := DefaultConfig()
	bad.RetentionDays = 0
	if _, err := New(context.Background(), pipeline.Resources{}, bad); err == nil {
		t.Fatal("New with an invalid config succeeded")
	}
}

func TestRegistered(t *testing.T) {
	r, ok := pipeline.Lookup(Name)
	if !ok || r.Consumes != schemas.TopicRequestLog || len(r.Produces) != 0 {
		t.Fatalf("registered %+v (found %v), want requestlog consuming %s", r, ok, schemas.TopicRequestLog)
	}
}
