package clickhouse_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	chsink "sendstream/sinks/clickhouse"
)

// TestMessagesPerDay: distinct messages per UTC day and status, since the
// given time, one workspace only, a redelivered change counted once.
func TestMessagesPerDay(t *testing.T) {
	conn := requestLogDB(t)
	ctx := context.Background()
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO message_status (event_id, workspace, message_id, status, at,
		recipient, external_id, template_id, policy_id, provider, detail, received)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		ev, ws, msg, status string
		at                  time.Time
	}{
		{"e1", "w1", "m1", "queued", day.Add(time.Hour)},
		{"e2", "w1", "m1", "sent", day.Add(2 * time.Hour)},
		{"e2", "w1", "m1", "sent", day.Add(2 * time.Hour)}, // redelivered
		{"e3", "w1", "m2", "queued", day.Add(23 * time.Hour)},
		{"e4", "w1", "m2", "bounced", day.Add(25 * time.Hour)},
		{"e5", "w1", "m0", "sent", day.Add(-time.Hour)}, // before since
		{"e6", "w2", "m9", "sent", day.Add(time.Hour)},  // another workspace
	} {
		if err := batch.Append(r.ev, r.ws, r.msg, r.status, r.at, "a@example.test", "", "", "p", "smtp", "", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	got, err := chsink.MessagesPerDay(ctx, conn, "w1", day)
	if err != nil {
		t.Fatal(err)
	}
	want := []chsink.DayCount{
		{Day: day, Status: "queued", Messages: 2},
		{Day: day, Status: "sent", Messages: 1},
		{Day: day.AddDate(0, 0, 1), Status: "bounced", Messages: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MessagesPerDay = %+v, want %+v", got, want)
	}
	if _, err := chsink.MessagesPerDay(ctx, conn, "", day); err == nil {
		t.Error("empty workspace accepted")
	}
}
