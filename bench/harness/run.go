package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Options are the harness settings shared by every benchmark of a run.
type Options struct {
	Root        string // repository root
	Self        string // this bench binary, re-executed for baselines
	Bin         string // bin/sendstream; empty when it could not be built
	BuildErr    error  // why Bin is empty
	Stack       StackEnv
	Warmup      time.Duration
	Duration    time.Duration
	Pairs       int
	Conns       int
	ServerProcs int  // GOMAXPROCS of servers and baselines
	Keep        bool // keep scratch directories (logs, broker data)
	// Tolerance is how far (relative) a pair's baseline may stray from the
	// running median before the pair is redone; 0 means 0.25 (PERFORMANCE.md).
	Tolerance float64
	// MaxStealGap is how many points the steal of a pair's two sides may
	// differ before the pair is redone; 0 means 10 (see Pairing).
	MaxStealGap float64
	Command     []string
	Log         io.Writer // progress lines
}

func (o Options) tolerance() float64 {
	if o.Tolerance > 0 {
		return o.Tolerance
	}
	return 0.25
}

func (o Options) maxStealGap() float64 {
	if o.MaxStealGap > 0 {
		return o.MaxStealGap
	}
	return 10
}

// ErrSkip marks a benchmark whose system does not exist yet.
var ErrSkip = errors.New("skipped")

// Exists reports why the benchmark's system does not exist, or nil.
func (b *Benchmark) Exists(root string) error {
	for _, p := range b.Requires {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			return fmt.Errorf("%w: %s does not exist yet", ErrSkip, p)
		}
	}
	return nil
}

// runner runs one benchmark.
type runner struct {
	o     Options
	b     *Benchmark
	dir   string
	rep   *Report
	bases []*side
	sys   *side
	s     *System
	procs []*Process
	conns int
	// suffix tells the fresh databases of two systems in one run apart.
	suffix string
	// cleanup of the benchmark's Prepare, run after the system stopped.
	cleanup func()
	// dropDB drops the run's own databases, last.
	dropDB func()
}

// Run measures one benchmark and returns its report (also on error, with
// Error or Skipped set). It does not write the report.
func Run(ctx context.Context, b *Benchmark, o Options) *Report {
	r := newRunner(b, o, "")
	err := r.run(ctx)
	r.stop()
	r.finish(err)
	return r.rep
}

// newRunner returns a runner of b whose fresh databases are named after
// b and suffix.
func newRunner(b *Benchmark, o Options, suffix string) *runner {
	r := &runner{o: o, b: b, conns: o.Conns, suffix: suffix}
	if b.Conns > 0 {
		r.conns = b.Conns
	}
	r.rep = &Report{
		Name: b.Name, Doc: b.Doc, Issue: b.Issue, Started: time.Now(), Command: o.Command,
		Machine: ReadMachine(), Baselines: b.Baselines, Targets: b.Targets,
		Config: Config{WarmupSec: o.Warmup.Seconds(), DurationSec: o.Duration.Seconds(), Pairs: o.Pairs,
			Conns: r.conns, ServerProcs: o.ServerProcs, Tolerance: o.tolerance(), Stack: o.Stack},
	}
	return r
}

// finish records how the run ended and removes the scratch directory of a
// run that succeeded (unless Keep).
func (r *runner) finish(err error) {
	r.rep.Finished = time.Now()
	b, o := r.b, r.o
	switch {
	case errors.Is(err, ErrSkip):
		r.rep.Skipped = err.Error()
	case err != nil:
		r.rep.Error = err.Error()
		r.rep.Pass = false
	}
	if !o.Keep && r.dir != "" && err == nil {
		os.RemoveAll(r.dir)
	} else if r.dir != "" {
		r.logf("%s: logs and data kept in %s", b.Name, r.dir)
	}
}

func (r *runner) logf(format string, args ...any) {
	if r.o.Log != nil {
		fmt.Fprintf(r.o.Log, format+"\n", args...)
	}
}

func (r *runner) stop() {
	if r.s != nil {
		r.s.Stop()
	}
	for _, p := range r.procs {
		p.Stop(5 * time.Second)
	}
	if r.cleanup != nil {
		r.cleanup()
		r.cleanup = nil
	}
	if r.dropDB != nil {
		r.dropDB()
		r.dropDB = nil
	}
}

func (r *runner) run(ctx context.Context) error {
	if err := r.setup(ctx); err != nil {
		return err
	}
	b := r.b
	if len(r.bases) > 0 {
		if err := r.pairs(ctx); err != nil {
			return err
		}
	}
	for _, ol := range b.OpenLoop {
		if err := r.openLoop(ctx, ol); err != nil {
			return err
		}
	}
	if b.Custom != nil && !b.SelfTest {
		if err := r.custom(ctx); err != nil {
			return err
		}
	}
	r.evaluate()
	return nil
}

// setup creates the fresh databases and the scratch directory, starts the
// baselines and the system, and probes the system.
func (r *runner) setup(ctx context.Context) error {
	b := r.b
	if !b.SelfTest {
		if err := b.Exists(r.o.Root); err != nil {
			return err
		}
		if r.o.Bin == "" {
			return fmt.Errorf("bin/sendstream: %v", r.o.BuildErr)
		}
		if err := r.o.Stack.Missing(); err != nil {
			return err
		}
		stack, drop, err := freshStores(ctx, r.o.Stack, b.Name+r.suffix)
		if err != nil {
			return err
		}
		r.o.Stack, r.rep.Config.Stack = stack, stack
		if r.o.Keep {
			r.logf("%s: databases kept: Postgres %s, ClickHouse %s", b.Name, stack.PostgresURL, stack.ClickHouseDB)
		} else {
			r.dropDB = drop
		}
	}
	var err error
	if r.dir, err = os.MkdirTemp("", "sendstream-bench-"+b.Name+"-"); err != nil {
		return fmt.Errorf("scratch dir: %w", err)
	}
	if err := r.startBaselines(ctx); err != nil {
		return err
	}
	if err := r.startSystem(ctx); err != nil {
		return err
	}
	return r.probe(ctx)
}
