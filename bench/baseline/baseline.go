// Package baseline holds the FROZEN baselines that benchmark ratios are
// measured against: bare fasthttp handlers and raw uses of Postgres,
// ClickHouse, the Kafka-protocol broker, Liquid, SMTP and DKIM, as
// ../../shared/PERFORMANCE.md lists them.
//
// FROZEN: nothing in this package may be optimised, tuned or otherwise
// changed once committed. A ratio means something only while its denominator
// stays the same code; a faster baseline would silently lower every ratio,
// a slower one inflate it. Add a new baseline under a new name instead.
//
// Every baseline runs in its own process (the bench binary re-executes itself)
// so that it shares no heap, scheduler or CPU accounting with the system under
// test or the load generator.
package baseline

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"sendstream/bench/load"
	"sendstream/bench/proc"
)

// Env is where the stateful baselines find the local stack.
type Env struct {
	PostgresURL    string
	ClickHouseAddr string
	ClickHouseDB   string
	Brokers        string // comma-separated host:port of a Kafka-protocol broker
	Dir            string // scratch directory for this run
}

// Need names a piece of the local stack a baseline uses.
type Need string

// The stack pieces a baseline may need.
const (
	NeedPostgres   Need = "postgres"
	NeedClickHouse Need = "clickhouse"
	NeedBroker     Need = "broker"
)

// Op does one unit of a work baseline's job and returns how many operations
// (rows, messages, renders) it completed. Each worker calls its own Op in a
// loop; an error is counted and the loop goes on.
type Op func(ctx context.Context) (int, error)

// Baseline is one frozen baseline. Exactly one of Handler (an HTTP baseline,
// served by a bare fasthttp server and driven by the load generator with
// Request) or Setup (a work baseline that measures its own throughput) is set.
type Baseline struct {
	Name string
	Doc  string
	Unit string // what one operation is: "requests", "events", "rows", …

	// HTTP baselines.
	Handler fasthttp.RequestHandler
	Request func(baseURL string) *load.Request

	// Work baselines: Setup prepares shared state and returns a constructor
	// of per-worker Ops and a cleanup; Workers is how many run at once (0:
	// GOMAXPROCS).
	Needs   []Need
	Workers int
	Setup   func(ctx context.Context, env Env) (newOp func(ctx context.Context, worker int) (Op, error), cleanup func(), err error)
}

// IsHTTP reports whether the baseline is an HTTP handler.
func (b *Baseline) IsHTTP() bool { return b.Handler != nil }

var (
	regMu    sync.Mutex
	registry = map[string]*Baseline{}
)

// register adds a baseline from an init function; it panics on a bad or
// duplicate declaration.
func register(b *Baseline) {
	regMu.Lock()
	defer regMu.Unlock()
	if b.Name == "" || (b.Handler == nil) == (b.Setup == nil) || (b.Handler != nil && b.Request == nil) {
		panic(fmt.Sprintf("baseline %q: want a name and either Handler+Request or Setup", b.Name))
	}
	if _, dup := registry[b.Name]; dup {
		panic("baseline " + b.Name + " registered twice")
	}
	registry[b.Name] = b
}

// Get returns the named baseline.
func Get(name string) (*Baseline, error) {
	regMu.Lock()
	defer regMu.Unlock()
	b, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("no baseline %q", name)
	}
	return b, nil
}

// Names lists every baseline, sorted.
func Names() []string {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// WorkResult is what a work baseline measured in its window.
type WorkResult struct {
	Name       string       `json:"name"`
	Unit       string       `json:"unit"`
	Workers    int          `json:"workers"`
	Ops        int64        `json:"ops"`
	Seconds    float64      `json:"seconds"`
	OpsPerSec  float64      `json:"opsPerSec"`
	CPUUsPerOp float64      `json:"cpuUsPerOp"` // whole baseline process
	Calls      load.Summary `json:"calls"`      // latency of one Op call
	Errors     int64        `json:"errors"`
	FirstError string       `json:"firstError,omitempty"`
}

// RunWork runs a work baseline in this process: its workers loop over their
// Ops for warm-up plus duration, counting what completes in the window, and
// this process's CPU time over the window.
func RunWork(ctx context.Context, b *Baseline, env Env, warmup, duration time.Duration) (*WorkResult, error) {
	if b.Setup == nil {
		return nil, fmt.Errorf("baseline %s is not a work baseline", b.Name)
	}
	newOp, cleanup, err := b.Setup(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("set up baseline %s: %w", b.Name, err)
	}
	defer cleanup()
	workers := b.Workers
	if workers <= 0 {
		workers = runtimeProcs()
	}
	ops := make([]Op, workers)
	for i := range ops {
		if ops[i], err = newOp(ctx, i); err != nil {
			return nil, fmt.Errorf("baseline %s worker %d: %w", b.Name, i, err)
		}
	}
	res := &WorkResult{Name: b.Name, Unit: b.Unit, Workers: workers}
	hist := load.NewHistogram()
	var measuring, stop atomic.Bool
	var done, errs atomic.Int64
	var firstErr sync.Once
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Add(1)
		go func(op Op) {
			defer wg.Done()
			for !stop.Load() && ctx.Err() == nil {
				t0 := time.Now()
				n, err := op(ctx)
				m := measuring.Load()
				if err != nil {
					if m {
						errs.Add(1)
						firstErr.Do(func() { res.FirstError = err.Error() })
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if m {
					hist.Record(time.Since(t0))
					done.Add(int64(n))
				}
			}
		}(op)
	}
	meter := proc.Meter{PIDs: map[string]int{"self": 0}}
	time.Sleep(warmup)
	meter.Start()
	start := time.Now()
	measuring.Store(true)
	select {
	case <-time.After(duration):
	case <-ctx.Done():
	}
	measuring.Store(false)
	res.Seconds = time.Since(start).Seconds()
	meter.End()
	stop.Store(true)
	wg.Wait()
	res.Ops, res.Errors = done.Load(), errs.Load()
	res.OpsPerSec = float64(res.Ops) / res.Seconds
	res.CPUUsPerOp = meter.PerOp(float64(res.Ops))["self"]
	res.Calls = hist.Summary()
	if res.Ops == 0 {
		return res, fmt.Errorf("baseline %s completed nothing: %s", b.Name, res.FirstError)
	}
	return res, ctx.Err()
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
