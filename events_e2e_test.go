package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sendstream/ingest/contacts"
	"sendstream/schemas"
	"sendstream/sinks/clickhouse"
	"sendstream/sinks/postgres"
	"sendstream/stages/analytics"
)

// Kill -9 of `sendstream serve` (the broker runs in its own process) while
// 10,000 goal events are being recorded: the client retries every event
// until it gets a 2xx, as a real client does with an externalId. After the
// restart every event is in ClickHouse exactly once and every goal of a
// matched contact is counted once in Postgres: counts and sums are checked.
func TestKillNineEventsExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test")
	}
	const (
		total    = 10000
		contactN = 100
	)
	e := newE2E(t)
	srv, base := e.server(t, "serve")
	var ws workspace
	e.admin(t, &ws, "workspace", "create", "--name", "kill-nine-events", "--plan", "enterprise", "--rate-multiplier", "100000")

	ctx := context.Background()
	pg, err := postgres.Open(ctx, e.st.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	cs := contacts.NewStore(pg)
	defer cs.Close()
	for i := 0; i < contactN; i++ {
		if _, err := cs.Upsert(ctx, ws.WorkspaceID, contacts.UpsertInput{Email: fmt.Sprintf("c%d@kill.test", i)}); err != nil {
			t.Fatal(err)
		}
	}

	// Event i: a purchase goal (every 10th a refund), matched for i%4 != 3.
	day := time.Date(2024, 2, 10, 0, 0, 0, 0, time.UTC)
	value := func(i int) float64 {
		if i%10 == 9 {
			return -float64(i%5+1) * 0.5
		}
		return float64(i%50+1) * 1.25
	}
	matched := func(i int) bool { return i%4 != 3 }
	body := func(i int) []byte {
		email := fmt.Sprintf("c%d@kill.test", i%contactN)
		if !matched(i) {
			email = fmt.Sprintf("nobody%d@kill.test", i)
		}
		b, _ := json.Marshal(map[string]any{
			"event": "order.completed", "email": email, "goalType": "purchase", "value": value(i), "currency": "EUR",
			"externalId": fmt.Sprintf("order-%d", i), "occurredAt": day.Add(time.Duration(i) * time.Second).Format(time.RFC3339),
			"properties": map[string]any{"i": i},
		})
		return b
	}

	var cur atomic.Value // the live base URL
	cur.Store(base)
	var accepted, created atomic.Int64
	ids := make([]string, total)
	work := make(chan int, total)
	for i := 0; i < total; i++ {
		work <- i
	}
	close(work)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	var wg sync.WaitGroup
	for w := 0; w < 24; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				for attempt := 0; ; attempt++ {
					if attempt > 600 {
						t.Errorf("event %d never accepted", i)
						return
					}
					req, _ := http.NewRequest("POST", cur.Load().(string)+"/api/v1/events", bytes.NewReader(body(i)))
					req.Header.Set("Authorization", "Bearer "+ws.APIKey)
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						time.Sleep(100 * time.Millisecond) // the server is down: retry the same externalId
						continue
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode/100 != 2 {
						time.Sleep(100 * time.Millisecond)
						continue
					}
					var o struct {
						ID     string `json:"id"`
						Status string `json:"status"`
					}
					if err := json.Unmarshal(b, &o); err != nil {
						t.Errorf("event %d: answer %s", i, b)
						return
					}
					if resp.StatusCode == 201 {
						created.Add(1)
					}
					ids[i] = o.ID
					accepted.Add(1)
					break
				}
			}
		}()
	}
	for accepted.Load() < 2500 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = srv.Process.Wait()
	atKill := accepted.Load()
	_, base2 := e.server(t, "serve")
	cur.Store(base2)
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d events accepted before the kill, %d after; %d answers were 201, %d duplicates of a claim made before the kill",
		atKill, total-int(atKill), created.Load(), total-int(created.Load()))
	var wantSum, wantMatchedSum float64
	var wantMatched, wantPurchases, wantRefunds int64
	for i := 0; i < total; i++ {
		if want := schemas.IDFromKey(ws.WorkspaceID, schemas.EventIDScope, fmt.Sprintf("order-%d", i)); ids[i] != want {
			t.Fatalf("event %d answered id %s, want %s", i, ids[i], want)
		}
		wantSum += value(i)
		if matched(i) {
			wantMatched++
			wantMatchedSum += value(i)
			if value(i) > 0 {
				wantPurchases++
			} else {
				wantRefunds++
			}
		}
	}

	ch, err := clickhouse.Open(ctx, e.st.ClickHouseAddr, e.st.ClickHouseDB)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	r := analytics.Range{From: day, To: day.Add(24 * time.Hour)}
	deadline := time.Now().Add(120 * time.Second)
	for {
		rows, err := analytics.EventsPerDay(ctx, ch, ws.WorkspaceID, r)
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, row := range rows {
			n += row.Events
		}
		if n == total {
			break
		}
		if n > total {
			t.Fatalf("ClickHouse counts %d events, want %d", n, total)
		}
		if time.Now().After(deadline) {
			t.Fatalf("ClickHouse has %d of %d events two minutes after the restart", n, total)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Every answered id, exactly once, and nothing else.
	rows, err := ch.Query(ctx, `SELECT DISTINCT id FROM events WHERE workspace = ?`, ws.WorkspaceID)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored[id] = true
	}
	rows.Close()
	distinct := len(stored)
	for i, id := range ids {
		if !stored[id] {
			t.Fatalf("event %d (id %s) got a 2xx but is not in ClickHouse", i, id)
		}
	}
	if distinct != total {
		t.Fatalf("ClickHouse holds %d distinct ids for the workspace, want %d", distinct, total)
	}
	rev, err := analytics.RevenuePerDay(ctx, ch, ws.WorkspaceID, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(rev) != 1 || math.Abs(rev[0].Net-wantSum) > 0.001 {
		t.Fatalf("revenue %+v, want net %.2f", rev, wantSum)
	}
	var raw uint64
	if err := ch.QueryRow(ctx, `SELECT count() FROM events WHERE workspace = ?`, ws.WorkspaceID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	t.Logf("ClickHouse: %d distinct events in %d raw rows (copies collapse at merge; queries read LIMIT 1 BY id); net revenue %.2f", distinct, raw, rev[0].Net)

	// Goals: counted once per matched event.
	deadline = time.Now().Add(60 * time.Second)
	for {
		var goals, purchases, refunds int64
		var ltv float64
		err := pg.QueryRow(ctx, `SELECT coalesce(sum(goals), 0)::bigint, coalesce(sum(purchase_count), 0)::bigint,
			coalesce(sum(refund_count), 0)::bigint, coalesce(sum(lifetime_value), 0)::float8
			FROM contact_activity WHERE workspace_id = $1`, ws.WorkspaceID).Scan(&goals, &purchases, &refunds, &ltv)
		if err != nil {
			t.Fatal(err)
		}
		if goals == wantMatched {
			if purchases != wantPurchases || refunds != wantRefunds || math.Abs(ltv-wantMatchedSum) > 0.001 {
				t.Fatalf("goals: purchases %d refunds %d ltv %.2f, want %d %d %.2f", purchases, refunds, ltv, wantPurchases, wantRefunds, wantMatchedSum)
			}
			t.Logf("Postgres: %d goals (%d purchases, %d refunds), lifetime value %.2f over %d contacts", goals, purchases, refunds, ltv, contactN)
			break
		}
		if goals > wantMatched {
			t.Fatalf("Postgres counted %d goals, want %d", goals, wantMatched)
		}
		if time.Now().After(deadline) {
			t.Fatalf("Postgres counted %d of %d goals a minute after the restart", goals, wantMatched)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
