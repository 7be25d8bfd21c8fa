// Package harness runs benchmarks the way ../../shared/PERFORMANCE.md says:
// it starts the system under test itself (a fresh broker and server per
// benchmark), measures it and its frozen baselines in alternating pairs with
// one load generator, and writes JSON results with ratios, secondary figures
// and pass/fail against the issue's targets.
//
// A benchmark is one small file in package main of ./bench that calls
// Register from init.
package harness

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"sendstream/bench/load"
)

// Benchmark declares one comparison of the system under test against frozen
// baselines.
type Benchmark struct {
	Name  string // selects it: go run ./bench -run NAME
	Doc   string // one line: what is measured
	Issue int    // the issue whose targets these are

	// Requires lists repository paths that must exist for the system to
	// exist (e.g. "main.go", "ingest/events"); when one is missing the
	// benchmark is skipped by default.
	Requires []string
	// Manual benchmarks run only when named with -run.
	Manual bool

	// Baselines are frozen baselines (package baseline) measured in every
	// pair; the pair's baseline figure is the slowest of them. Empty means
	// no pairs: only the open-loop figures.
	Baselines []string
	// SelfTest replaces the system under test with a second copy of the
	// first (HTTP) baseline: a check of the harness itself (ratio ≈ 1). No
	// stack or server is needed.
	SelfTest bool

	// Prepare, when set, runs before the system starts; the environment
	// variables it returns are added to the server's (e.g. the
	// SENDSTREAM_SMTP_URL of a mail sink the benchmark runs), and cleanup
	// (may be nil) runs when the benchmark ends.
	Prepare func(ctx context.Context, dir string) (env []string, cleanup func(), err error)
	// Setup runs once after the system started and the bench workspace
	// exists (e.g. to seed data).
	Setup func(ctx context.Context, s *System) error
	// Work, when set, replaces the closed-loop HTTP run of the system in
	// each pair: it drives the system for w.Warmup, calls w.OnStart, runs
	// for w.Duration, calls w.OnEnd, and returns the operations completed
	// in that window (e.g. messages delivered end to end). Request is still
	// sent once as the probe.
	Work func(ctx context.Context, s *System, w load.Window) (ops float64, err error)
	// Custom, when set, runs after the pairs and open-loop runs (often
	// instead of them: no Baselines, no OpenLoop): it measures the system
	// its own way, e.g. in several phases against receivers in this
	// process, and records its phases and checks through c. Request is
	// still sent once as the probe.
	Custom func(ctx context.Context, s *System, c *CustomRun) error
	// Request builds the system's closed-loop request once; it is reused
	// across every run of the benchmark.
	Request func(s *System) *load.Request
	// Conns of the closed loop (and Work's w.Conns); 0 takes the -conns
	// flag (default 64).
	Conns int

	// OpenLoop lists fixed rates at which latency, RSS and CPU are measured
	// after the pairs.
	OpenLoop []OpenLoop
	Targets  Targets
}

// OpenLoop is one fixed-rate measurement.
type OpenLoop struct {
	Name     string  // label; defaults to the rate
	Rate     float64 // requests per second
	InFlight int     // generator capacity (connections); 0: max(256, Rate/10), at most 4096
	// Request overrides the benchmark's Request (e.g. a search instead of
	// an upsert).
	Request  func(s *System) *load.Request
	P50Max   time.Duration // 0: reported, not checked
	P99Max   time.Duration
	RSSMaxMB float64 // server RSS ceiling during the run; 0: not checked
	// NoBaseline skips measuring the HTTP baseline at the same rate.
	NoBaseline bool
	// During, when set, runs alongside the fixed-rate load for its
	// measured window (ctx ends with the window) and returns latencies it
	// observed, e.g. of marker events from the API to their ClickHouse row
	// or of sends to the SMTP sink (PERFORMANCE.md, end-to-end latency).
	During func(ctx context.Context, s *System) (*load.Histogram, error)
	// DuringP99Max checks the p99 of During's latencies; 0: reported only.
	DuringP99Max time.Duration
}

// Label names the open-loop run.
func (o OpenLoop) Label() string {
	if o.Name != "" {
		return o.Name
	}
	return fmt.Sprintf("%g/s", o.Rate)
}

func (o OpenLoop) inFlight() int {
	if o.InFlight > 0 {
		return o.InFlight
	}
	n := int(o.Rate / 10)
	if n < 256 {
		n = 256
	}
	if n > 4096 {
		n = 4096
	}
	return n
}

// Targets are the pass/fail thresholds of a benchmark; zero fields are not
// checked.
type Targets struct {
	MinRatio      float64 // median per-pair ratio system/baseline
	MinOpsPerSec  float64 // system's median closed-loop throughput in ops/s
	MaxCPUPerOpUs float64 // server+broker CPU µs per op (closed loop, median)
}

var (
	regMu    sync.Mutex
	registry = map[string]*Benchmark{}
)

// Register adds a benchmark; call it from init. It panics on an invalid
// declaration or a duplicate name.
func Register(b Benchmark) {
	if err := b.validate(); err != nil {
		panic(err)
	}
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[b.Name]; dup {
		panic("benchmark " + b.Name + " registered twice")
	}
	registry[b.Name] = &b
}

func (b *Benchmark) validate() error {
	switch {
	case b.Name == "":
		return fmt.Errorf("benchmark without a name")
	case b.SelfTest && len(b.Baselines) == 0:
		return fmt.Errorf("benchmark %s: a self test needs a baseline", b.Name)
	case !b.SelfTest && b.Request == nil:
		return fmt.Errorf("benchmark %s: no Request", b.Name)
	case len(b.Baselines) == 0 && len(b.OpenLoop) == 0 && b.Custom == nil:
		return fmt.Errorf("benchmark %s: neither baselines, open-loop rates nor a custom run", b.Name)
	}
	for _, o := range b.OpenLoop {
		if o.Rate <= 0 {
			return fmt.Errorf("benchmark %s: open-loop rate %v", b.Name, o.Rate)
		}
	}
	return nil
}

// Benchmarks returns every registered benchmark, sorted by name.
func Benchmarks() []*Benchmark {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]*Benchmark, 0, len(registry))
	for _, b := range registry {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
