package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/bench/harness"
	"sendstream/bench/load"
	"sendstream/ingest/contacts"
	"sendstream/schemas"
)

// journeys: issue 26's benchmark line, a custom run in two phases against
// the bench workspace (enterprise plan, rate multiplier 1,000,000):
//
//   - (a) trigger throughput: POST /api/public/journeys/trigger in closed
//     loop (-conns, 64) on an active api_event journey (reentry once: a
//     delay of a day, then an email: a welcome series), each call a
//     distinct seeded contact, as an integration triggers once per
//     signup. ≥ 2,000 accepted calls/s over -duration; machine CPU per
//     accepted call (the engine starting each execution's wait included).
//   - (b) timers: jnTimers() executions (100,000 unless
//     BENCH_JOURNEY_TIMERS says otherwise) of a second api_event journey,
//     a delay then send_email, started through the same trigger endpoint
//     paced so that their due times spread over one minute (for fewer
//     executions, proportionally less, so the firing rate stays that of
//     100,000 a minute). Once every one waits, each due time is read from
//     journey_executions.next_wake_at; when all fired, lateness = the
//     send step's journey_step_runs.done_at − its due time: p99 ≤ 6 s.
//     Every execution must end completed and the SMTP sink (jnSink, in
//     this process) must have exactly one message per execution's
//     contact: none lost, none doubled. Machine CPU per execution step
//     (the wake-up and the send, two per execution; the delivery to the
//     sink included) from the first due time until the last email.
const (
	jnTimersDefault = 100_000
	jnSpreadPer100k = time.Minute      // due times of 100,000 executions spread over this
	jnSetupMargin   = 30 * time.Second // the delay beyond the spread, plus jnSetupPerExec per execution: time to start them all
	jnSetupPerExec  = time.Millisecond
	jnLatenessMax   = 6 * time.Second
	jnTriggerMin    = 2000.0
	// jnContactsA is how many distinct contacts (a) can trigger: 25,000
	// calls/s for the default 2 s warm-up and 10 s window.
	jnContactsA = 300_000
	jnDomain    = "@bench.example.com"
)

func init() {
	harness.Register(harness.Benchmark{
		Name:     "journeys",
		Doc:      "journey trigger calls/s (closed loop, distinct contacts); 100,000 executions' timers due within a minute: lateness p99, one email each",
		Issue:    26,
		Requires: []string{"main.go", "ingest/journeys", "stages/journeys", "sinks/journeys", "sinks/timers"},
		Prepare:  prepareJnSink,
		Setup:    jnSetup,
		Request: func(s *harness.System) *load.Request {
			jnMu.Lock()
			defer jnMu.Unlock()
			jnState.req = jnTriggerRequest(s, jnState.triggerKey, "jt-a-")
			return jnState.req
		},
		Custom: jnRun,
	})
}

// jnState is what Setup made for the run: the journeys' ids and trigger
// keys, and the closed-loop request of (a) (its counter shared with the
// harness's probe, so no contact is triggered twice).
var (
	jnMu    sync.Mutex
	jnState jnSetupState
)

// jnSetupState is jnState's type.
type jnSetupState struct {
	triggerID          string
	triggerKey         string
	timersID           string
	timersKey          string
	timersDelay        time.Duration
	contactsA, timersN int
	req                *load.Request
}

// jnTimers is the number of executions of phase (b):
// BENCH_JOURNEY_TIMERS, default 100,000 (develop with fewer).
func jnTimers() int {
	if v, err := strconv.Atoi(os.Getenv("BENCH_JOURNEY_TIMERS")); err == nil && v > 0 {
		return v
	}
	return jnTimersDefault
}

// jnSpread is how long the due times of n executions spread over.
func jnSpread(n int) time.Duration {
	return time.Duration(float64(jnSpreadPer100k) * float64(n) / 100_000)
}

// jnTriggerRequest is a trigger call for contact <prefix><n>.
func jnTriggerRequest(s *harness.System, key, prefix string) *load.Request {
	return &load.Request{Method: "POST", URL: s.BaseURL + "/api/public/journeys/trigger",
		Header:      [][2]string{{"Authorization", "Bearer " + s.APIKey}, {"X-Trigger-Key", key}},
		ContentType: "application/json",
		Vary: func(dst []byte, n uint64) []byte {
			dst = append(dst, `{"email":"`...)
			dst = append(dst, prefix...)
			dst = strconv.AppendUint(dst, n, 10)
			dst = append(dst, jnDomain+`","data":{"plan":"pro","n":`...)
			dst = strconv.AppendUint(dst, n, 10)
			return append(dst, `}}`...)
		}}
}

// jnSetup creates the template and the two journeys with the admin CLI and
// seeds the contacts with COPY.
func jnSetup(ctx context.Context, s *harness.System) error {
	file := func(name string, v any) (string, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		p := filepath.Join(s.Dir, name)
		return p, os.WriteFile(p, b, 0o600)
	}
	tf, err := file("journey-template.json", map[string]any{"name": "Welcome",
		"subject": "Welcome, {{ contact.first_name | default: 'friend' }}",
		"html": "<!doctype html><html><body><h1>Hello {{ contact.first_name | default: 'friend' }}!</h1>" +
			"<p>Your {{ data.plan }} trial has started. Here is what to try first.</p>" +
			"<p>Reply to this email if you have a question.</p></body></html>"})
	if err != nil {
		return err
	}
	var tpl struct{ ID string }
	if err := s.Admin(ctx, &tpl, "template", "create", "--workspace", s.WorkspaceID, "--file", tf); err != nil {
		return err
	}
	n := jnTimers()
	delay := jnSpread(n) + jnSetupMargin + time.Duration(n)*jnSetupPerExec
	if d, err := time.ParseDuration(os.Getenv("BENCH_JOURNEY_DELAY")); err == nil && d > 0 {
		delay = d // a host too slow to start them all in time
	}
	create := func(name, wait string) (id, key string, err error) {
		jf, err := file(name+".json", map[string]any{"name": name, "status": "active", "reentry": "once",
			"trigger": map[string]any{"type": "api_event"},
			"steps": []any{
				map[string]any{"type": "delay", "duration": wait},
				map[string]any{"type": "send_email", "templateId": tpl.ID},
			}})
		if err != nil {
			return "", "", err
		}
		var j struct{ ID, TriggerKey string }
		if err := s.Admin(ctx, &j, "journey", "create", "--workspace", s.WorkspaceID, "--file", jf); err != nil {
			return "", "", err
		}
		if j.ID == "" || j.TriggerKey == "" {
			return "", "", fmt.Errorf("journey create %s: no id or trigger key in its answer", name)
		}
		return j.ID, j.TriggerKey, nil
	}
	jnMu.Lock()
	defer jnMu.Unlock()
	if jnState.triggerID, jnState.triggerKey, err = create("bench-trigger", "24h"); err != nil {
		return err
	}
	if jnState.timersID, jnState.timersKey, err = create("bench-timers", delay.Round(time.Second).String()); err != nil {
		return err
	}
	jnState.timersDelay, jnState.timersN = delay.Round(time.Second), n
	jnState.contactsA = jnContactsA
	return jnSeed(ctx, s, jnState.contactsA, n)
}

// jnSeed loads a contacts jt-a-0… and b contacts jt-b-0… (ACTIVE) into
// the bench workspace with COPY and rebuilds its counters.
func jnSeed(ctx context.Context, s *harness.System, a, b int) error {
	start := time.Now()
	pool, err := pgxpool.New(ctx, s.Stack.PostgresURL)
	if err != nil {
		return fmt.Errorf("seed: connect: %w", err)
	}
	defer pool.Close()
	ws := s.WorkspaceID
	at := time.Now().UTC()
	i := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == a+b {
			return nil, nil
		}
		email := "jt-a-" + strconv.Itoa(i) + jnDomain
		if i >= a {
			email = "jt-b-" + strconv.Itoa(i-a) + jnDomain
		}
		row := []any{schemas.NewID(), ws, int64(i + 1), email, "Ada", contacts.StatusActive, "import", `{}`, at, at}
		i++
		return row, nil
	})
	n, err := pool.CopyFrom(ctx, pgx.Identifier{"contacts"},
		[]string{"id", "workspace_id", "seq", "email", "first_name", "status", "source", "custom_fields", "created_at", "updated_at"}, src)
	if err != nil {
		return fmt.Errorf("seed: copy contacts: %w", err)
	}
	if err := settleContactSeed(ctx, pool, ws, "contacts"); err != nil {
		return err
	}
	log.Printf("journeys: seeded %d contacts (COPY) in %s", n, time.Since(start).Round(time.Second))
	return nil
}
