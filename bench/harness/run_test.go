package harness

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"sendstream/bench/load"
)

// The test binary doubles as the baseline child process.
func TestMain(m *testing.M) {
	if handled, code := ChildMain(os.Args[1:]); handled {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// A self test end to end at a small scale: two baseline server processes,
// alternating pairs, an open-loop run, a written report. It checks the
// mechanics, not the numbers: 300 ms runs beside other test packages swing
// far more than 25%, so the stray check is widened here (pairs_test.go tests
// it on its own).
func TestSelfTestRunsPairsAndWritesAReport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b := &Benchmark{Name: "selftest", Doc: "test", SelfTest: true, Baselines: []string{"http-json"},
		OpenLoop: []OpenLoop{{Rate: 500, NoBaseline: true, P99Max: 5 * time.Second, DuringP99Max: time.Second,
			During: func(ctx context.Context, s *System) (*load.Histogram, error) {
				h := load.NewHistogram()
				<-ctx.Done() // runs until the measured window ends
				h.Record(2 * time.Millisecond)
				return h, nil
			}}},
		Targets: Targets{MinRatio: 0.2}}
	if err := b.validate(); err != nil {
		t.Fatal(err)
	}
	rep := Run(context.Background(), b, Options{Self: self, Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond,
		Pairs: 2, Conns: 4, ServerProcs: 1, Tolerance: 1000, MaxStealGap: 1000}) // 300 ms windows: too short to judge noise
	if rep.Error != "" || rep.Skipped != "" {
		t.Fatalf("error %q skipped %q", rep.Error, rep.Skipped)
	}
	if len(rep.Pairs) < 2 || rep.Ratio <= 0 || rep.Median.SystemOpsPerSec <= 0 || rep.Median.BaselineOpsPerSec <= 0 {
		t.Fatalf("pairs %+v ratio %v medians %+v", rep.Pairs, rep.Ratio, rep.Median)
	}
	var sides []string
	for _, s := range rep.Runs {
		sides = append(sides, s.Side)
		if s.Load == nil || s.Load.OK == 0 || s.Load.Non2xx+s.Load.Errors != 0 {
			t.Fatalf("run %+v", s)
		}
	}
	if !strings.HasPrefix(strings.Join(sides, ","), "baseline,system,baseline,system") {
		t.Fatalf("runs not alternating: %v", sides)
	}
	if len(rep.OpenLoop) != 1 || rep.OpenLoop[0].System.OK == 0 || rep.OpenLoop[0].RSSMaxMB <= 0 ||
		rep.OpenLoop[0].During == nil || rep.OpenLoop[0].During.Count != 1 {
		t.Fatalf("open loop %+v", rep.OpenLoop)
	}
	dir := t.TempDir()
	if err := rep.Write(dir); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(rep.File)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"runs", "pairs", "ratio", "machine", "targets", "checks", "pass", "openLoop"} {
		if _, ok := back[k]; !ok {
			t.Fatalf("report lacks %q", k)
		}
	}
	if s := rep.Summary(); !strings.HasPrefix(s, "selftest: ") || !strings.Contains(s, "ratio") {
		t.Fatalf("summary %q", s)
	}
}

func TestEvaluateFailsMissedTargets(t *testing.T) {
	r := &runner{o: Options{Pairs: 1}, b: &Benchmark{Targets: Targets{MinRatio: 0.6, MaxCPUPerOpUs: 10}}}
	r.rep = &Report{Pairs: []Pair{{Attempt: 1, Baseline: 100, System: 50, Ratio: 0.5}}, Stable: true, Ratio: 0.5,
		Median: Medians{SystemCPUUsPerOp: map[string]float64{"server+broker": 8}}}
	r.evaluate()
	if r.rep.Pass {
		t.Fatalf("ratio 0.5 < 0.6 must fail: %+v", r.rep.Checks)
	}
	got := map[string]bool{}
	for _, c := range r.rep.Checks {
		got[c.Name] = c.Pass
	}
	if got["ratio"] || !got["cpu µs/op server+broker"] || !got["pairs stable"] {
		t.Fatalf("checks %+v", r.rep.Checks)
	}
	r.rep.Checks, r.rep.Ratio = nil, 0.61
	r.evaluate()
	if !r.rep.Pass {
		t.Fatalf("every target met must pass: %+v", r.rep.Checks)
	}
}

// TestLatencyMissSharedByTheBaseline: an open-loop latency miss is a fail
// either way; the check carries the bare baseline's value, and the summary
// says the host cannot judge the line only when the baseline misses too.
func TestLatencyMissSharedByTheBaseline(t *testing.T) {
	run := func(baselineP99 float64) *Report {
		r := &runner{b: &Benchmark{Name: "x", OpenLoop: []OpenLoop{{Rate: 1000, P50Max: 3 * time.Millisecond, P99Max: 15 * time.Millisecond}}}}
		r.rep = &Report{Name: "x", OpenLoop: []OpenLoopRun{{
			Label:    "1000/s",
			System:   &load.Result{Requests: 100, OK: 100, Latency: load.Summary{P50Ms: 1, P99Ms: 24.4}},
			Baseline: &load.Result{Latency: load.Summary{P50Ms: 0.7, P99Ms: baselineP99}},
		}}}
		r.evaluate()
		return r.rep
	}
	slow := run(21)
	if slow.Pass {
		t.Fatalf("p99 24.4 > 15 must fail whatever the baseline did: %+v", slow.Checks)
	}
	var p99, p50 Check
	for _, c := range slow.Checks {
		switch c.Name {
		case "p99 ms at 1000/s":
			p99 = c
		case "p50 ms at 1000/s":
			p50 = c
		}
	}
	if p99.Pass || p99.Baseline != 21 || !p99.BaselineMissed {
		t.Fatalf("p99 check %+v", p99)
	}
	if !p50.Pass || p50.Baseline != 0.7 || p50.BaselineMissed {
		t.Fatalf("p50 check %+v", p50)
	}
	if s := slow.Summary(); !strings.Contains(s, "missed p99 ms at 1000/s: 24.4 (target ≤ 15); the bare baseline misses it too (21), so this host cannot judge the line") {
		t.Fatalf("summary %q", s)
	}
	fast := run(1.3)
	if fast.Pass || strings.Contains(fast.Summary(), "cannot judge") {
		t.Fatalf("a miss the baseline does not share: pass %v, summary %q", fast.Pass, fast.Summary())
	}
}
