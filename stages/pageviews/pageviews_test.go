package pageviews_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/stages/pageviews"
)

func TestPageViewsReachClickHouseOnce(t *testing.T) {
	ch := stack.CH(t)
	ctx := context.Background()
	st, err := pageviews.New(ctx, pipeline.Resources{ClickHouse: ch}, pageviews.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ws := "ws-" + schemas.NewID()
	at := time.Date(2025, 4, 1, 9, 30, 0, 0, time.UTC)
	mk := func(id, path string) schemas.Envelope {
		b, _ := json.Marshal(schemas.PageViewPayload{Host: "shop.example", Path: path, Title: "T", ReferrerHost: "news.test",
			UTMSource: "mail", ScreenWidth: 1440, UserAgent: "UA", OccurredAt: at})
		return schemas.Envelope{ID: id, Workspace: ws, Type: schemas.TypePageViewed, Key: ws, OccurredAt: at, Payload: b}
	}
	views := []schemas.Envelope{mk("v1", "/"), mk("v2", "/pricing"), mk("v1", "/")}
	for _, v := range views {
		if _, err := st.Handle(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Handle(ctx, views[1]); err != nil { // redelivered after a flush
		t.Fatal(err)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var n uint64
	q := `SELECT count() FROM (SELECT id FROM page_views WHERE workspace = ? LIMIT 1 BY id)`
	if err := ch.QueryRow(ctx, q, ws).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d page views, want 2", n)
	}
	var path, ref string
	var width uint16
	if err := ch.QueryRow(ctx, `SELECT path, referrer_host, screen_width FROM page_views WHERE workspace = ? AND id = 'v2' LIMIT 1`, ws).Scan(&path, &ref, &width); err != nil {
		t.Fatal(err)
	}
	if path != "/pricing" || ref != "news.test" || width != 1440 {
		t.Fatalf("row: %s %s %d", path, ref, width)
	}
	if _, err := st.Handle(ctx, schemas.Envelope{ID: "x", Workspace: ws, Type: schemas.TypePageViewed, Payload: json.RawMessage(`{"occurredAt":"bad"}`)}); !pipeline.IsPermanent(err) {
		t.Fatalf("malformed: %v", err)
	}
}
