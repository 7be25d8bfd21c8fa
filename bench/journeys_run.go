package main

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/valyala/fasthttp"

	"sendstream/bench/harness"
	"sendstream/bench/load"
)

var (
	//go:embed sql/journeys_waiting.sql
	jnWaitingSQL string
	//go:embed sql/journeys_due.sql
	jnDueSQL string
	//go:embed sql/journeys_steps.sql
	jnStepsSQL string
	//go:embed sql/journeys_completed.sql
	jnCompletedSQL string
)

// jnConns is the closed loop's connections in (a) and the senders of (b)'s
// paced triggers: the harness's default -conns.
const jnConns = 64

// jnRun runs phase (a) then phase (b) and records their checks; each
// phase's verdict is printed as one line.
func jnRun(ctx context.Context, s *harness.System, c *harness.CustomRun) error {
	jnMu.Lock()
	st := jnState
	jnMu.Unlock()
	pool, err := pgxpool.New(ctx, s.Stack.PostgresURL)
	if err != nil {
		return fmt.Errorf("journeys: connect to Postgres: %w", err)
	}
	defer pool.Close()
	sk, err := currentJnSink()
	if err != nil {
		return err
	}
	c.Settle(ctx)
	if err := jnTriggerPhase(ctx, s, c, pool, st.req, st.triggerID); err != nil {
		return err
	}
	c.Settle(ctx)
	return jnTimersPhase(ctx, s, c, pool, sk, st.timersID, st.timersKey, st.timersN, st.timersDelay)
}

// loadAvg is the host's 1-minute load average (/proc/loadavg).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// verdict is PASS or FAIL.
func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// jnTriggerPhase is (a): trigger calls in closed loop for -warmup then
// -duration, each a distinct contact; accepted calls/s and machine CPU per
// accepted call. Afterwards it waits (up to a minute) until the engine has
// handled every started execution, so (b) starts on an idle system.
func jnTriggerPhase(ctx context.Context, s *harness.System, c *harness.CustomRun, pool *pgxpool.Pool, req *load.Request, journeyID string) error {
	client := load.NewClient(s.Addr, jnConns)
	meter := c.Meter()
	load0 := loadAvg()
	res, err := load.Closed(ctx, client, req, jnConns, load.Window{Warmup: c.Warmup, Duration: c.Duration,
		OnStart: meter.Start, OnEnd: meter.End})
	if err != nil {
		return fmt.Errorf("journeys (a): %w", err)
	}
	rate := float64(res.OK) / max(res.Seconds, 1e-9)
	cpu := meter.PerOp(float64(res.OK))
	// The engine starts each execution's wait after the answer: wait for
	// the backlog to drain.
	drain := time.Now()
	var backlog int64
	for time.Since(drain) < time.Minute && ctx.Err() == nil {
		var done int64
		if err := pool.QueryRow(ctx, jnCompletedSQL, journeyID).Scan(&done, &backlog); err != nil {
			return fmt.Errorf("journeys (a): count unstarted executions: %w", err)
		}
		if backlog == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	p := harness.Phase{Name: "a", CPUUsPerOp: cpu, StealPct: meter.StealPercent(),
		Figures: map[string]float64{"acceptedPerSec": rate, "accepted": float64(res.OK), "non2xx": float64(res.Non2xx),
			"errors": float64(res.Errors), "windowSec": res.Seconds, "p50Ms": res.Latency.P50Ms, "p99Ms": res.Latency.P99Ms,
			"engineDrainSec": time.Since(drain).Seconds(), "engineBacklogLeft": float64(backlog)}}
	p.Note = fmt.Sprintf("%s accepted trigger calls/s (%d non-2xx, %d errors) over %.0f s, p50 %.1f p99 %.1f ms, machine %.0f µs/call (server %.0f, broker %.0f, postgres %.0f, clickhouse %.0f, generator %.0f), engine drained %.1f s after, load %s→%s",
		si(rate), res.Non2xx, res.Errors, res.Seconds, res.Latency.P50Ms, res.Latency.P99Ms, cpu["machine"], cpu["server"],
		cpu["broker"], cpu["postgres"], cpu["clickhouse"], cpu["generator"], p.Figures["engineDrainSec"], load0, loadAvg())
	if res.FirstFailure != "" {
		p.Note += ", first failure: " + res.FirstFailure
	}
	c.AddPhase(p)
	ok := rate >= jnTriggerMin && res.Non2xx == 0 && res.Errors == 0
	c.Check("(a) accepted trigger calls/s, each a distinct contact", "≥ 2000", rate, rate >= jnTriggerMin)
	c.Check("(a) trigger calls refused or failed", "0", float64(res.Non2xx+res.Errors), res.Non2xx+res.Errors == 0)
	fmt.Printf("journeys (a) trigger: %s %s\n", verdict(ok), p.Note)
	return nil
}

// jnDue is one waiting execution of (b).
type jnDue struct {
	email string
	due   time.Time
}

// jnTimersPhase is (b); see the file comment of journeys.go.
func jnTimersPhase(ctx context.Context, s *harness.System, c *harness.CustomRun, pool *pgxpool.Pool, sk *jnSink,
	journeyID, key string, n int, delay time.Duration) error {
	load0 := loadAvg()
	// Start n executions, paced so their due times spread over 95% of
	// jnSpread(n): the engine's jitter must not push them past it.
	pace := time.Duration(float64(jnSpread(n)) * 0.95)
	accepted, failed, firstErr, sent := jnStart(ctx, s, key, n, pace)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	c.Logf("(b) %d of %d executions started in %.1f s (%d failed%s); delay %s", accepted, n, sent.Seconds(), failed, firstErr, delay)
	if accepted == 0 {
		return fmt.Errorf("journeys (b): no trigger was accepted: %s", firstErr)
	}
	// Wait until every started execution waits, before the first is due.
	var total, waiting int64
	var first, last time.Time
	for {
		if err := pool.QueryRow(ctx, jnWaitingSQL, journeyID).Scan(&total, &waiting, &first, &last); err != nil {
			return fmt.Errorf("journeys (b): count waiting executions: %w", err)
		}
		if waiting == accepted {
			break
		}
		if waiting > 0 && time.Now().After(first) {
			return fmt.Errorf("journeys (b): only %d of %d executions were waiting when the first timer fell due (delay %s too short for this machine)", waiting, accepted, delay)
		}
		if !load.SleepCtx(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
	due := map[string]jnDue{}
	rows, err := pool.Query(ctx, jnDueSQL, journeyID)
	if err != nil {
		return fmt.Errorf("journeys (b): read due times: %w", err)
	}
	for rows.Next() {
		var id string
		var d jnDue
		if err := rows.Scan(&id, &d.email, &d.due); err != nil {
			rows.Close()
			return fmt.Errorf("journeys (b): read due times: %w", err)
		}
		due[id] = d
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("journeys (b): read due times: %w", err)
	}
	spread := last.Sub(first)
	c.Logf("(b) %d executions waiting, due from %s over %.1f s; firing starts in %.1f s",
		len(due), first.Format("15:04:05.000"), spread.Seconds(), time.Until(first).Seconds())

	// Measure from just before the first due time until every execution
	// completed and every email arrived.
	if !load.SleepCtx(ctx, time.Until(first)-500*time.Millisecond) {
		return ctx.Err()
	}
	meter := c.Meter()
	meter.Start()
	t0 := time.Now()
	base := sk.total.Load()
	var perSec []float64
	prev, lastSec := base, t0
	// Give up 2 minutes + 5 ms per execution after the last due time (a
	// slow host's engine falls far behind; its lateness still counts).
	deadline := last.Add(2*time.Minute + time.Duration(n)*5*time.Millisecond)
	// The count of completed executions reads every execution of the
	// journey (30-150 ms of Postgres at 100,000, on a busy machine): asked
	// only once every email arrived (or at the deadline), so the
	// measurement does not weigh on the CPU it measures (an execution
	// completes when its send step stores the message, before the email
	// goes out, so by then every one normally has).
	var completed, unstarted int64
	for {
		if sk.total.Load()-base >= accepted || time.Now().After(deadline) {
			if err := pool.QueryRow(ctx, jnCompletedSQL, journeyID).Scan(&completed, &unstarted); err != nil {
				return fmt.Errorf("journeys (b): count completed executions: %w", err)
			}
		}
		if completed >= accepted && sk.total.Load()-base >= accepted || time.Now().After(deadline) {
			break
		}
		if time.Since(lastSec) >= time.Second {
			cur := sk.total.Load()
			perSec = append(perSec, float64(cur-prev))
			prev, lastSec = cur, time.Now()
		}
		if !load.SleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
	meter.End()
	window := time.Since(t0)
	load1 := loadAvg()
	// Late duplicates would arrive now.
	if !load.SleepCtx(ctx, 5*time.Second) {
		return ctx.Err()
	}

	late, wake, steps, err := jnLateness(ctx, pool, journeyID, due)
	if err != nil {
		return err
	}
	lost, doubled, strangers := jnEmails(sk, due)
	cpu := meter.PerOp(float64(steps))
	perExec := map[string]float64{}
	for k, v := range meter.PerOp(float64(len(due))) {
		perExec[k] = v
	}
	p50, p99, pmax := quantile(late, 0.50), quantile(late, 0.99), quantile(late, 1)
	p := harness.Phase{Name: "b", CPUUsPerOp: cpu, StealPct: meter.StealPercent(),
		Figures: map[string]float64{"executions": float64(len(due)), "started": float64(accepted), "triggerFailed": float64(failed),
			"startSec": sent.Seconds(), "delaySec": delay.Seconds(), "dueSpreadSec": spread.Seconds(),
			"latenessP50Sec": p50, "latenessP90Sec": quantile(late, 0.90), "latenessP99Sec": p99, "latenessMaxSec": pmax,
			"wakeLatenessP50Sec": quantile(wake, 0.50), "wakeLatenessP99Sec": quantile(wake, 0.99),
			"measured": float64(len(late)), "completed": float64(completed), "emails": float64(sk.total.Load() - base),
			"emailsLost": float64(lost), "emailsDoubled": float64(doubled), "emailsToOthers": float64(strangers),
			"stepsInWindow": float64(steps), "windowSec": window.Seconds(),
			"machineCpuUsPerExecution": perExec["machine"]},
		Samples: map[string][]float64{"emailsEachSecond": perSec}}
	p.Note = fmt.Sprintf("%d executions due over %.1f s (started in %.1f s, delay %s): send-step lateness p50 %.2f p99 %.2f max %.2f s (wake step p99 %.2f s), %d completed, %d emails (%d lost, %d doubled) in %.1f s, machine %.0f µs/step (%d steps; server %.0f, broker %.0f, postgres %.0f, clickhouse %.0f, sink+bench %.0f), load %s→%s→%s",
		len(due), spread.Seconds(), sent.Seconds(), delay, p50, p99, pmax, quantile(wake, 0.99), completed,
		sk.total.Load()-base, lost, doubled, window.Seconds(), cpu["machine"], steps, cpu["server"], cpu["broker"],
		cpu["postgres"], cpu["clickhouse"], cpu["generator"], load0, load1, loadAvg())
	c.AddPhase(p)
	n64 := int64(len(due))
	latenessOK := len(late) == len(due) && p99 <= jnLatenessMax.Seconds()
	c.Check("(b) executions waiting on timers when the first fell due", fmt.Sprintf("= %d started", accepted), float64(len(due)), n64 == accepted && failed == 0)
	c.Check("(b) due times spread, s (due within one minute)", "≤ 60", spread.Seconds(), spread <= time.Minute)
	c.Check("(b) p99 lateness, s (send step's done_at − due time)", "≤ 6", p99, latenessOK)
	c.Check("(b) executions completed", fmt.Sprintf("= %d", len(due)), float64(completed), completed == n64)
	c.Check("(b) emails lost", "0", float64(lost), lost == 0)
	c.Check("(b) emails doubled", "0", float64(doubled+strangers), doubled == 0 && strangers == 0)
	ok := n64 == accepted && failed == 0 && spread <= time.Minute && latenessOK && completed == n64 && lost == 0 && doubled == 0 && strangers == 0
	fmt.Printf("journeys (b) timers: %s %s\n", verdict(ok), p.Note)
	return nil
}

// jnStart triggers contacts jt-b-0 … jt-b-(n-1) on the timers journey,
// the k-th at start + k·pace/n, from jnConns senders; it returns how many
// calls were accepted and failed, the first failure and how long it took.
func jnStart(ctx context.Context, s *harness.System, key string, n int, pace time.Duration) (accepted, failed int64, firstErr string, took time.Duration) {
	client := load.NewClient(s.Addr, jnConns)
	url := s.BaseURL + "/api/public/journeys/trigger"
	body := jnTriggerRequest(s, key, "jt-b-").Vary
	var next, ok, bad atomic.Int64
	var first atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range jnConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(url)
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/json")
			req.Header.Set("Authorization", "Bearer "+s.APIKey)
			req.Header.Set("X-Trigger-Key", key)
			var buf []byte
			for {
				k := next.Add(1) - 1
				if k >= int64(n) || ctx.Err() != nil {
					return
				}
				if !load.SleepCtx(ctx, time.Until(start.Add(time.Duration(float64(pace)*float64(k)/float64(n))))) {
					return
				}
				buf = body(buf[:0], uint64(k))
				req.SetBodyRaw(buf)
				err := client.DoTimeout(req, resp, 30*time.Second)
				if err == nil && resp.StatusCode() == 200 {
					ok.Add(1)
					continue
				}
				bad.Add(1)
				if err == nil {
					err = fmt.Errorf("status %d: %.200s", resp.StatusCode(), resp.Body())
				}
				first.CompareAndSwap(nil, err.Error())
			}
		}()
	}
	wg.Wait()
	if e, isStr := first.Load().(string); isStr {
		firstErr = ", first: " + e
	}
	return ok.Load(), bad.Load(), firstErr, time.Since(start)
}

// jnLateness reads the engine's record of each execution's steps and
// returns, for the executions in due, the send step's lateness (its
// done_at − the due time) and the wake-up's (the delay step's done_at −
// the due time) in seconds, sorted, and how many steps ran.
func jnLateness(ctx context.Context, pool *pgxpool.Pool, journeyID string, due map[string]jnDue) (late, wake []float64, steps int, err error) {
	rows, err := pool.Query(ctx, jnStepsSQL, journeyID)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("journeys (b): read step runs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, addr string
		var at time.Time
		if err := rows.Scan(&id, &addr, &at); err != nil {
			return nil, nil, 0, fmt.Errorf("journeys (b): read step runs: %w", err)
		}
		d, ok := due[id]
		if !ok {
			continue
		}
		steps++
		switch addr {
		case "0":
			wake = append(wake, at.Sub(d.due).Seconds())
		case "1":
			late = append(late, at.Sub(d.due).Seconds())
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, 0, fmt.Errorf("journeys (b): read step runs: %w", err)
	}
	sort.Float64s(late)
	sort.Float64s(wake)
	return late, wake, steps, nil
}

// jnEmails compares the sink's messages with the executions: contacts with
// none (lost), with more than one (doubled), and messages to anyone else.
func jnEmails(sk *jnSink, due map[string]jnDue) (lost, doubled, strangers int) {
	got := sk.recipients()
	for _, d := range due {
		switch n := got[strings.ToLower(d.email)]; {
		case n == 0:
			lost++
		case n > 1:
			doubled++
		}
		delete(got, strings.ToLower(d.email))
	}
	for _, n := range got {
		strangers += n
	}
	return lost, doubled, strangers
}

// quantile returns the q-quantile of sorted xs (nearest rank), 0 when
// empty.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
