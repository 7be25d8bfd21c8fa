package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/mail"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/pipeline/pipelinetest"
	"sendstream/sinks/email/smtptest"
	"sendstream/sinks/timers"
)

// TestEventJourneyOnInjectedClock (issue 26, Done when): an `event`
// journey (send A, wait 2 days, branch on a purchase goal: B for buyers,
// C for the others; exitOn the event "upgraded") runs for 100 contacts
// whose "signed_up" events arrive over /api/v1/events. The server runs in
// this process on a test clock (roles.clock: the engine, the journey store
// and the durable timers all read it), with the real stages, broker,
// Postgres and SMTP test server.
//
// Before the clock moves: every contact gets A rendered with its event's
// properties, 30 record a purchase goal, 20 others send "upgraded" (their
// executions end converted, with the goal's value), and nothing else
// arrives. After the clock moves 2 days: the 30 buyers get B, the 50
// others C, each rendered with the trigger's data, every one of the 80
// executions completes, the 20 converted get nothing more; no message
// arrives twice.
func TestEventJourneyOnInjectedClock(t *testing.T) {
	const n, buyers, upgraders = 100, 30, 20
	e := newE2E(t)
	smtp := smtptest.Start(t, smtptest.Options{})
	clock := &pipelinetest.Clock{}
	base := e.inProcessServer(t, clock, "SENDSTREAM_SMTP_URL=smtp://"+smtp.Addr+"?tls=none")
	ctx := context.Background()
	pg, err := pgx.Connect(ctx, e.st.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close(context.Background()) })

	var ws workspace
	e.admin(t, &ws, "workspace", "create", "--name", "journey-clock", "--plan", "enterprise", "--rate-multiplier", "100000")
	dir := t.TempDir()
	file := func(name string, v any) string { return writeJSONFile(t, dir, name, v) }
	template := func(name, subject, html string) string {
		var tpl struct{ ID string }
		e.admin(t, &tpl, "template", "create", "--workspace", ws.WorkspaceID, "--file", file(name+".json",
			map[string]any{"name": name, "subject": subject, "html": html}))
		return tpl.ID
	}
	a := template("welcome", "Welcome to {{ plan }}", "<p>Day one of {{ plan }} for member {{ n }}</p>")
	b := template("buyer", "Thanks for buying, {{ plan }}", "<p>Receipt for member {{ n }}</p>")
	c := template("nudge", "Still thinking about {{ plan }}?", "<p>Come back, member {{ n }}</p>")
	var journey struct{ ID string }
	e.admin(t, &journey, "journey", "create", "--workspace", ws.WorkspaceID, "--file", file("journey.json", map[string]any{
		"name": "clock", "status": "active", "reentry": "once",
		"trigger": map[string]any{"type": "event", "event": "signed_up"},
		"exitOn":  map[string]any{"event": "upgraded"},
		"steps": []any{
			map[string]any{"type": "send_email", "templateId": a},
			map[string]any{"type": "delay", "duration": "2d"},
			map[string]any{"type": "branch", "if": map[string]any{"goal": "purchase", "countAtLeast": 1},
				"then": []any{map[string]any{"type": "send_email", "templateId": b}},
				"else": []any{map[string]any{"type": "send_email", "templateId": c}}},
		}}))
	if journey.ID == "" {
		t.Fatalf("journey create: %+v", journey)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	post := func(path string, body any) {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+ws.APIKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s %s: %d %s", path, raw, resp.StatusCode, out)
		}
	}
	addr := func(i int) string { return fmt.Sprintf("clock-%d@example.com", i) }
	plan := func(i int) string { return fmt.Sprintf("plan-%d", i) }
	for i := range n {
		post("/api/v1/contacts", map[string]any{"email": addr(i)})
	}
	started := clock.Now()
	for i := range n {
		post("/api/v1/events", map[string]any{"event": "signed_up", "email": addr(i),
			"properties": map[string]any{"plan": plan(i), "n": i}})
	}

	count := func(query string, args ...any) int {
		t.Helper()
		var k int
		if err := pg.QueryRow(ctx, query, args...).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	waitFor(t, 3*time.Minute, "every execution waiting at the delay and every welcome email", func() bool {
		return count(`SELECT count(*) FROM journey_executions WHERE journey_id = $1 AND state = 'active'
			AND position = '1' AND next_wake_at IS NOT NULL`, journey.ID) == n && len(smtp.Messages()) >= n
	})
	// The wait ends two days after the step ran, on the test clock.
	if late := count(`SELECT count(*) FROM journey_executions WHERE journey_id = $1
		AND next_wake_at NOT BETWEEN $2 AND $3`, journey.ID, started.Add(48*time.Hour), clock.Now().Add(48*time.Hour)); late != 0 {
		t.Fatalf("%d executions wake outside [start, now] + 2 days", late)
	}

	// Buyers 0..29 record a purchase; 30..49 convert; 50..99 do nothing.
	for i := range buyers {
		post("/api/v1/events", map[string]any{"event": "order.completed", "email": addr(i), "goalType": "purchase",
			"value": 20 + i, "currency": "EUR"})
	}
	for i := buyers; i < buyers+upgraders; i++ {
		post("/api/v1/events", map[string]any{"event": "upgraded", "email": addr(i), "goalType": "subscription",
			"value": 12.5, "currency": "EUR"})
	}
	waitFor(t, 2*time.Minute, "purchases counted and upgrades converted", func() bool {
		return count(`SELECT count(*) FROM contact_activity WHERE workspace_id = $1 AND purchase_count >= 1`, ws.WorkspaceID) == buyers &&
			count(`SELECT count(*) FROM journey_executions WHERE journey_id = $1 AND state = 'converted'`, journey.ID) == upgraders
	})
	time.Sleep(6 * time.Second) // a timer on the real clock, or a stray message, has room to show up
	if got := len(smtp.Messages()); got != n {
		t.Fatalf("%d messages before the clock moved, want the %d welcome emails only", got, n)
	}
	if k := count(`SELECT count(*) FROM journey_executions WHERE journey_id = $1 AND state = 'active' AND position = '1'`,
		journey.ID); k != n-upgraders {
		t.Fatalf("%d executions still waiting before the clock moved, want %d", k, n-upgraders)
	}

	clock.Advance(48*time.Hour + time.Minute)
	waitFor(t, 3*time.Minute, "the 80 executions completed and their second emails", func() bool {
		return count(`SELECT count(*) FROM journey_executions WHERE journey_id = $1 AND state = 'completed'`, journey.ID) == n-upgraders &&
			len(smtp.Messages()) >= 2*n-upgraders
	})
	time.Sleep(3 * time.Second) // room for a duplicate

	type convRow struct {
		email, state, position string
		value                  *float64
		finished               bool
	}
	rows, err := pg.Query(ctx, `SELECT c.email, x.state, x.position, x.conversion_value::float8, x.finished_at IS NOT NULL
		FROM journey_executions x JOIN contacts c ON c.id = x.contact_id WHERE x.journey_id = $1`, journey.ID)
	if err != nil {
		t.Fatal(err)
	}
	execs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (convRow, error) {
		var x convRow
		return x, r.Scan(&x.email, &x.state, &x.position, &x.value, &x.finished)
	})
	if err != nil {
		t.Fatal(err)
	}
	byEmail := map[string]convRow{}
	for _, x := range execs {
		byEmail[x.email] = x
	}
	got := map[string][]string{}
	for _, m := range smtp.Messages() {
		to, subject, body := readMail(t, m.Data)
		got[to] = append(got[to], subject+" | "+body)
	}
	var bad []string
	for i := range n {
		want := []string{fmt.Sprintf("Welcome to %s | Day one of %s for member %d", plan(i), plan(i), i)}
		x := byEmail[addr(i)]
		switch {
		case i < buyers:
			want = append(want, fmt.Sprintf("Thanks for buying, %s | Receipt for member %d", plan(i), i))
		case i < buyers+upgraders:
			if x.state != "converted" || x.position != "1" || x.value == nil || *x.value != 12.5 || !x.finished {
				bad = append(bad, fmt.Sprintf("%s: execution %+v, want converted at the delay with value 12.5", addr(i), x))
			}
		default:
			want = append(want, fmt.Sprintf("Still thinking about %s? | Come back, member %d", plan(i), i))
		}
		if i < buyers || i >= buyers+upgraders {
			if x.state != "completed" || !x.finished {
				bad = append(bad, fmt.Sprintf("%s: execution %+v, want completed", addr(i), x))
			}
		}
		if fmt.Sprint(got[addr(i)]) != fmt.Sprint(want) {
			bad = append(bad, fmt.Sprintf("%s: got %q, want %q", addr(i), got[addr(i)], want))
		}
	}
	if len(execs) != n || len(smtp.Messages()) != 2*n-upgraders {
		bad = append(bad, fmt.Sprintf("%d executions (want %d), %d messages (want %d)", len(execs), n, len(smtp.Messages()), 2*n-upgraders))
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Fatalf("%d problems:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// inProcessServer runs `sendstream serve` (runRoles) in this process on
// clock, configured by the environment as e's processes are, plus extra
// ("NAME=value"); it returns the base URL once /readyz answers 200 and
// stops the server when the test ends, then drops the schema of its timers
// (an injected clock keeps River's tables in one of their own). One per
// test binary: metrics and the shared timers are per process.
func (e *e2eEnv) inProcessServer(t *testing.T, clock *pipelinetest.Clock, extra ...string) string {
	t.Helper()
	addr := freeAddr(t)
	vars := append(append([]string{}, e.vars...), extra...)
	vars = append(vars, "SENDSTREAM_LISTEN="+addr, "SENDSTREAM_SITE_URL=http://"+addr)
	for _, v := range vars {
		name, value, _ := strings.Cut(v, "=")
		t.Setenv(name, value)
	}
	schema := timers.QueueFor(e.prefix)
	t.Cleanup(func() {
		pg, err := pgx.Connect(context.Background(), e.st.PostgresURL)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer pg.Close(context.Background())
		if _, err := pg.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	// runRoles sets the process's logger and GC settings: give them back.
	logger, gc, mem := slog.Default(), debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	debug.SetGCPercent(gc)
	t.Cleanup(func() {
		slog.SetDefault(logger)
		debug.SetGCPercent(gc)
		debug.SetMemoryLimit(mem)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runRoles(ctx, roles{http: true, stages: []string{}, clock: clock}, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("the in-process server did not stop within a minute")
		}
	})
	base := "http://" + addr
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("server stopped: %v", err)
		default:
		}
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
	}
	t.Fatalf("the in-process server on %s never became ready", addr)
	return ""
}

// readMail returns a message's recipient, decoded subject and the text of
// its HTML part with tags removed and spaces collapsed.
func readMail(t *testing.T, data []byte) (to, subject, text string) {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	subject, _ = new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	html := htmlPart(t, m.Header.Get("Content-Type"), m.Header.Get("Content-Transfer-Encoding"), m.Body)
	var b strings.Builder
	inTag := false
	for _, r := range html {
		switch {
		case r == '<':
			inTag = true
			b.WriteByte(' ')
		case r == '>':
			inTag = false
		case !inTag:
			b.WriteRune(r)
		}
	}
	return m.Header.Get("To"), subject, strings.Join(strings.Fields(b.String()), " ")
}

// htmlPart returns the decoded text/html part of a body of content type ct.
func htmlPart(t *testing.T, ct, cte string, body io.Reader) string {
	t.Helper()
	parts, err := smtptest.Parts(ct, cte, body)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if p.Type == "text/html" {
			return p.Text
		}
	}
	return ""
}
