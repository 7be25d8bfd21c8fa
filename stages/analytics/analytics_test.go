package analytics_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/stages/analytics"
)

func env(t *testing.T, ws, id string, p schemas.EventPayload) schemas.Envelope {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return schemas.Envelope{ID: id, Workspace: ws, Type: schemas.TypeEventRecorded, Key: ws, OccurredAt: p.OccurredAt, Payload: b}
}

func TestEventsReachClickHouseOnceAndQueriesCountOnce(t *testing.T) {
	ch := stack.CH(t)
	ctx := context.Background()
	st, err := analytics.New(ctx, pipeline.Resources{ClickHouse: ch}, analytics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ws := "ws-" + schemas.NewID()
	day1 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	day2 := day1.Add(24 * time.Hour)
	evs := []schemas.Envelope{
		env(t, ws, "e1", schemas.EventPayload{Event: "order.completed", ContactID: "c1", Email: "a@b.co", GoalType: "purchase", Value: "100.10", Currency: "EUR", ExternalID: "o1", OccurredAt: day1, ReceivedAt: day1, Properties: json.RawMessage(`{"sku":"x"}`), Source: "api"}),
		env(t, ws, "e2", schemas.EventPayload{Event: "order.completed", ContactID: "c2", GoalType: "purchase", Value: "50", Currency: "EUR", OccurredAt: day1.Add(time.Hour), ReceivedAt: day1, Source: "api"}),
		env(t, ws, "e3", schemas.EventPayload{Event: "order.refunded", ContactID: "c1", GoalType: "purchase", Value: "-30.05", Currency: "EUR", OccurredAt: day2, ReceivedAt: day2, Source: "import"}),
		env(t, ws, "e4", schemas.EventPayload{Event: "page.cta", OccurredAt: day2, ReceivedAt: day2, Source: "public"}),
		env(t, ws, "e5", schemas.EventPayload{Event: "order.completed", ContactID: "c1", GoalType: "purchase", Value: "20", Currency: "USD", OccurredAt: day2, ReceivedAt: day2, Source: "api"}),
	}
	for _, e := range evs {
		if _, err := st.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Handle(ctx, evs[0]); err != nil { // redelivered within a batch
		t.Fatal(err)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Redelivered after the flush (the runner died before committing).
	for _, e := range evs[:3] {
		if _, err := st.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var raw uint64
	if err := ch.QueryRow(ctx, "SELECT count() FROM events WHERE workspace = ?", ws).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if raw < 5 {
		t.Fatalf("%d raw rows", raw)
	}
	var hash, props, src string
	var value float64
	var hasValue uint8
	if err := ch.QueryRow(ctx, "SELECT email_hash, properties, source, value, has_value FROM events WHERE workspace = ? AND id = 'e1' LIMIT 1", ws).
		Scan(&hash, &props, &src, &value, &hasValue); err != nil {
		t.Fatal(err)
	}
	if len(hash) != 64 || props != `{"sku":"x"}` || src != "api" || value != 100.10 || hasValue != 1 {
		t.Fatalf("row e1: %s %s %s %v %d", hash, props, src, value, hasValue)
	}

	r := analytics.Range{From: day1.Add(-time.Hour), To: day2.Add(time.Hour)}
	perDay, err := analytics.EventsPerDay(ctx, ch, ws, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []analytics.DayCount{
		{Day: "2025-03-01", Event: "order.completed", Events: 2},
		{Day: "2025-03-02", Event: "order.completed", Events: 1},
		{Day: "2025-03-02", Event: "order.refunded", Events: 1},
		{Day: "2025-03-02", Event: "page.cta", Events: 1},
	}
	if !equalJSON(perDay, want) {
		t.Fatalf("events per day %+v", perDay)
	}
	rev, err := analytics.RevenuePerDay(ctx, ch, ws, r)
	if err != nil {
		t.Fatal(err)
	}
	wantRev := []analytics.DayRevenue{
		{Day: "2025-03-01", Currency: "EUR", Gross: 150.1, Refunds: 0, Net: 150.1, Conversions: 2},
		{Day: "2025-03-02", Currency: "EUR", Gross: 0, Refunds: 30.05, Net: -30.05, RefundCount: 1},
		{Day: "2025-03-02", Currency: "USD", Gross: 20, Net: 20, Conversions: 1},
	}
	if !equalJSON(rev, wantRev) {
		t.Fatalf("revenue per day %+v", rev)
	}
	uc, err := analytics.UniqueContacts(ctx, ch, ws, r)
	if err != nil {
		t.Fatal(err)
	}
	wantUC := []analytics.EventContacts{
		{Event: "order.completed", Contacts: 2, Events: 3},
		{Event: "order.refunded", Contacts: 1, Events: 1},
		{Event: "page.cta", Contacts: 0, Events: 1},
	}
	if !equalJSON(uc, wantUC) {
		t.Fatalf("unique contacts %+v", uc)
	}
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestMalformedIsPermanentAndOtherTypesIgnored(t *testing.T) {
	ch := stack.CH(t)
	st, err := analytics.New(context.Background(), pipeline.Resources{ClickHouse: ch}, analytics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Handle(context.Background(), schemas.Envelope{ID: "x", Workspace: "w", Type: schemas.TypeEventRecorded, Payload: json.RawMessage(`{"event":1}`)})
	if !pipeline.IsPermanent(err) {
		t.Fatalf("malformed: %v", err)
	}
	if _, err := st.Handle(context.Background(), schemas.Envelope{ID: "x", Type: "other.v1", Payload: json.RawMessage(`1`)}); err != nil {
		t.Fatalf("other type: %v", err)
	}
}

// The README documents the queries the code runs, verbatim.
func TestREADMEDocumentsTheQueries(t *testing.T) {
	b, err := os.ReadFile("../../ingest/events/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]string{"events per day": analytics.EventsPerDaySQL, "revenue": analytics.RevenuePerDaySQL, "unique contacts": analytics.UniqueContactsSQL} {
		if !strings.Contains(string(b), strings.TrimSpace(q)) {
			t.Errorf("README does not show the %s query as run", name)
		}
	}
}
