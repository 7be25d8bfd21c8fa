package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"sendstream/bench/baseline"
	"sendstream/bench/load"
	"sendstream/bench/proc"
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

// side is one thing measured in a pair: a baseline or the system.
type side struct {
	name   string
	http   bool
	req    *load.Request
	client *fasthttp.HostClient
	pids   map[string]int
	settle []int
	proc   *Process // HTTP baseline server
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
	// cleanup of the benchmark's Prepare, run after the system stopped.
	cleanup func()
	// dropDB drops the run's own databases, last.
	dropDB func()
}

// Run measures one benchmark and returns its report (also on error, with
// Error or Skipped set). It does not write the report.
func Run(ctx context.Context, b *Benchmark, o Options) *Report {
	r := &runner{o: o, b: b, conns: o.Conns}
	if b.Conns > 0 {
		r.conns = b.Conns
	}
	r.rep = &Report{
		Name: b.Name, Doc: b.Doc, Issue: b.Issue, Started: time.Now(), Command: o.Command,
		Machine: ReadMachine(), Baselines: b.Baselines, Targets: b.Targets,
		Config: Config{WarmupSec: o.Warmup.Seconds(), DurationSec: o.Duration.Seconds(), Pairs: o.Pairs,
			Conns: r.conns, ServerProcs: o.ServerProcs, Tolerance: o.tolerance(), Stack: o.Stack},
	}
	err := r.run(ctx)
	r.stop()
	r.rep.Finished = time.Now()
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
	return r.rep
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
		stack, drop, err := freshStores(ctx, r.o.Stack, b.Name)
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
	if err := r.probe(ctx); err != nil {
		return err
	}
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

func (r *runner) startBaselines(ctx context.Context) error {
	for _, name := range r.b.Baselines {
		bl, err := baseline.Get(name)
		if err != nil {
			return err
		}
		sd := &side{name: name, http: bl.IsHTTP()}
		if bl.IsHTTP() {
			p, url, err := StartBaselineServer(ctx, r.o.Self, name, r.dir, r.o.ServerProcs)
			if err != nil {
				return err
			}
			r.procs = append(r.procs, p)
			sd.proc = p
			sd.req = bl.Request(url)
			if sd.client, err = client(sd.req, r.conns); err != nil {
				return err
			}
			sd.pids = map[string]int{"server": p.PID(), "generator": 0}
			sd.settle = []int{p.PID()}
		} else {
			for _, n := range bl.Needs {
				if (n == baseline.NeedPostgres && r.o.Stack.PostgresURL == "") || (n == baseline.NeedClickHouse && r.o.Stack.ClickHouseAddr == "") {
					return fmt.Errorf("baseline %s needs %s: %v", name, n, r.o.Stack.Missing())
				}
				if n == baseline.NeedBroker && r.o.Bin == "" {
					return fmt.Errorf("baseline %s needs a broker (bin/sendstream broker): %v", name, r.o.BuildErr)
				}
			}
		}
		r.bases = append(r.bases, sd)
	}
	return nil
}

// stackCommands are the local stack's processes measured by command name
// on both sides of a pair (a baseline uses them too when it needs them).
var stackCommands = map[string]string{"postgres": "postgres", "clickhouse": "clickhouse-serv"}

func client(req *load.Request, conns int) (*fasthttp.HostClient, error) {
	addr, err := req.Addr()
	if err != nil {
		return nil, err
	}
	return load.NewClient(addr, conns), nil
}

func (r *runner) startSystem(ctx context.Context) error {
	sd := &side{name: r.b.Name, http: true}
	if r.b.SelfTest {
		name := r.b.Baselines[0]
		bl, _ := baseline.Get(name)
		p, url, err := StartBaselineServer(ctx, r.o.Self, name, r.dir, r.o.ServerProcs)
		if err != nil {
			return err
		}
		r.procs = append(r.procs, p)
		r.s = &System{Root: r.o.Root, Dir: r.dir, BaseURL: url, Server: p, ServerProcs: r.o.ServerProcs}
		sd.req = bl.Request(url)
	} else {
		var env []string
		if r.b.Prepare != nil {
			var cleanup func()
			var err error
			if env, cleanup, err = r.b.Prepare(ctx, r.dir); err != nil {
				return fmt.Errorf("prepare %s: %w", r.b.Name, err)
			}
			r.cleanup = cleanup
		}
		r.logf("%s: starting a fresh broker and sendstream serve (GOMAXPROCS=%d)", r.b.Name, r.o.ServerProcs)
		s, err := StartSystem(ctx, r.o.Root, r.o.Bin, r.dir, r.o.Stack, r.o.ServerProcs, env...)
		if err != nil {
			return err
		}
		r.s = s
		r.logf("%s: server %s (pid %d), broker %s (pid %d), workspace %s", r.b.Name, s.BaseURL, s.Server.PID(), s.BrokerAddr, s.Broker.PID(), s.WorkspaceID)
		if r.b.Setup != nil {
			if err := r.b.Setup(ctx, s); err != nil {
				return fmt.Errorf("set up %s: %w", r.b.Name, err)
			}
		}
		sd.req = r.b.Request(s)
	}
	var err error
	if sd.client, err = client(sd.req, r.conns); err != nil {
		return err
	}
	sd.pids = r.s.PIDs()
	for role, pid := range sd.pids {
		if role != "generator" {
			sd.settle = append(sd.settle, pid)
		}
	}
	r.sys = sd
	return nil
}

// probe sends one request to the system: a 404 or 405 means the endpoint
// does not exist yet (skip); any other non-2xx is an error worth seeing
// before spending minutes on it.
func (r *runner) probe(ctx context.Context) error {
	res, err := load.Closed(ctx, r.sys.client, r.sys.req, 1, load.Window{Duration: 200 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("probe %s: %w", r.sys.req.URL, err)
	}
	if res.OK > 0 && res.Non2xx == 0 && res.Errors == 0 {
		return nil
	}
	if res.Statuses[404] > 0 || res.Statuses[405] > 0 {
		return fmt.Errorf("%w: %s %s answers %s", ErrSkip, r.sys.req.Method, r.sys.req.URL, res.FirstFailure)
	}
	return fmt.Errorf("probe %s %s: %s", r.sys.req.Method, r.sys.req.URL, res.FirstFailure)
}

// pairs measures baseline, system, baseline, system … until the pairing is
// done.
func (r *runner) pairs(ctx context.Context) error {
	p := NewPairing(r.o.Pairs)
	p.Tolerance, p.MaxStealGap = r.o.tolerance(), r.o.maxStealGap()
	for !p.Done() {
		attempt := len(p.Pairs) + 1
		slowest, steal := math.Inf(1), 0.0
		for _, bs := range r.bases {
			run, err := r.measure(ctx, attempt, "baseline", bs)
			if err != nil {
				return err
			}
			slowest, steal = math.Min(slowest, run.OpsPerSec), math.Max(steal, run.StealPct)
		}
		run, err := r.measure(ctx, attempt, "system", r.sys)
		if err != nil {
			return err
		}
		ok := p.AddWithSteal(slowest, run.OpsPerSec, steal, run.StealPct)
		last := p.Pairs[len(p.Pairs)-1]
		r.logf("%s: pair %d: baseline %s, system %s, ratio %.3f, steal %.0f%%/%.0f%%%s", r.b.Name, attempt, si(slowest), si(run.OpsPerSec), last.Ratio,
			steal, run.StealPct, map[bool]string{true: "", false: " (redo: " + last.Reason + ")"}[ok])
	}
	r.rep.Pairs = p.Pairs
	r.rep.Stable = p.Stable()
	r.rep.Ratio = round3(p.MedianRatio())
	r.medians(p)
	return nil
}

// measure takes one sample of one side.
func (r *runner) measure(ctx context.Context, attempt int, kind string, sd *side) (*Sample, error) {
	run := &Sample{Pair: attempt, Side: kind, Name: sd.name, Started: time.Now()}
	// Let every process of the comparison go idle (background flushes of
	// the previous run), so neither side pays for the other.
	run.SettleMs = settle(ctx, r.settlePIDs(), 5*time.Second).Milliseconds()
	if !sd.http {
		env := baseline.Env{PostgresURL: r.o.Stack.PostgresURL, ClickHouseAddr: r.o.Stack.ClickHouseAddr, ClickHouseDB: r.o.Stack.ClickHouseDB}
		bl, _ := baseline.Get(sd.name)
		var broker *Process
		for _, n := range bl.Needs {
			if n == baseline.NeedBroker {
				p, addr, err := StartBroker(ctx, r.o.Bin, filepath.Join(r.dir, fmt.Sprintf("%s-%d", sd.name, attempt)))
				if err != nil {
					return nil, err
				}
				broker, env.Brokers = p, addr
			}
		}
		machine := &proc.Meter{} // steal over the child's whole run, warm-up included
		machine.Start()
		w, err := RunWorkBaseline(ctx, r.o.Self, sd.name, r.dir, env, r.o.ServerProcs, r.o.Warmup, r.o.Duration)
		machine.End()
		broker.Stop(5 * time.Second)
		if err != nil {
			return nil, err
		}
		run.Work, run.OpsPerSec, run.StealPct = w, w.OpsPerSec, machine.StealPercent()
		run.CPUUsPerOp = map[string]float64{"baseline": w.CPUUsPerOp}
		r.rep.Runs = append(r.rep.Runs, *run)
		return run, nil
	}
	meter := &proc.Meter{PIDs: sd.pids, Commands: stackCommands}
	if kind == "system" && r.b.Work != nil && !r.b.SelfTest {
		ops, err := r.b.Work(ctx, r.s, load.Window{Warmup: r.o.Warmup, Duration: r.o.Duration, OnStart: meter.Start, OnEnd: meter.End, Conns: r.conns})
		if err != nil {
			return nil, fmt.Errorf("system run of %s: %w", sd.name, err)
		}
		run.OpsPerSec = ops / r.o.Duration.Seconds()
		run.CPUUsPerOp, run.StealPct = meter.PerOp(ops), meter.StealPercent()
		if s, ok := run.CPUUsPerOp["server"]; ok {
			run.CPUUsPerOp["server+broker"] = round3(s + run.CPUUsPerOp["broker"])
		}
		r.rep.Runs = append(r.rep.Runs, *run)
		return run, nil
	}
	res, err := load.Closed(ctx, sd.client, sd.req, r.conns, load.Window{
		Warmup: r.o.Warmup, Duration: r.o.Duration, OnStart: meter.Start, OnEnd: meter.End})
	if err != nil {
		return nil, fmt.Errorf("%s run of %s: %w", kind, sd.name, err)
	}
	run.Load, run.OpsPerSec = res, res.OpsPerSec
	run.CPUUsPerOp, run.StealPct = meter.PerOp(float64(res.OK)*float64(sd.req.Ops())), meter.StealPercent()
	if g, ok := run.CPUUsPerOp["generator"]; ok {
		run.GeneratorUsPerReq = round3(g * float64(sd.req.Ops()))
	}
	if s, ok := run.CPUUsPerOp["server"]; ok {
		run.CPUUsPerOp["server+broker"] = round3(s + run.CPUUsPerOp["broker"])
	}
	r.rep.Runs = append(r.rep.Runs, *run)
	if bad := res.Non2xx + res.Errors; bad > 0 {
		r.logf("%s: %s run of %s: %d of %d requests failed, first: %s", r.b.Name, kind, sd.name, bad, res.Requests, res.FirstFailure)
	}
	return run, nil
}

// settlePIDs lists every process of the comparison (server, broker,
// baseline servers).
func (r *runner) settlePIDs() []int {
	var all []int
	for _, x := range append([]*side{r.sys}, r.bases...) {
		if x != nil {
			all = append(all, x.settle...)
		}
	}
	return all
}

// medians fills the report's medians over the accepted pairs.
func (r *runner) medians(p *Pairing) {
	acc := map[int]bool{}
	for _, q := range p.Accepted() {
		acc[q.Attempt] = true
	}
	var sysOps, baseOps, gen []float64
	sysCPU, baseCPU := map[string][]float64{}, map[string][]float64{}
	for _, run := range r.rep.Runs {
		if !acc[run.Pair] {
			continue
		}
		dst := baseCPU
		if run.Side == "system" {
			dst = sysCPU
			sysOps = append(sysOps, run.OpsPerSec)
			if run.GeneratorUsPerReq > 0 {
				gen = append(gen, run.GeneratorUsPerReq)
			}
		}
		for role, v := range run.CPUUsPerOp {
			dst[role] = append(dst[role], v)
		}
	}
	for _, q := range p.Accepted() {
		baseOps = append(baseOps, q.Baseline)
	}
	med := func(m map[string][]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range m {
			out[k] = round3(Median(v))
		}
		return out
	}
	unit := "requests"
	if bl, err := baseline.Get(r.b.Baselines[0]); err == nil && bl.Unit != "" {
		unit = bl.Unit
	}
	r.rep.Median = Medians{
		BaselineOpsPerSec: math.Round(Median(baseOps)), SystemOpsPerSec: math.Round(Median(sysOps)),
		SystemCPUUsPerOp: med(sysCPU), BaselineCPUUsPerOp: med(baseCPU), GeneratorUsPerReq: round3(Median(gen)), Unit: unit,
	}
}

// openLoop measures the system at a fixed rate (latency from intended send
// times, RSS, CPU), then the first HTTP baseline at the same rate.
func (r *runner) openLoop(ctx context.Context, ol OpenLoop) error {
	sd := r.sys
	req := sd.req
	if ol.Request != nil && !r.b.SelfTest {
		req = ol.Request(r.s)
	}
	out := OpenLoopRun{Label: ol.Label(), Rate: ol.Rate}
	all := r.settlePIDs()
	settle(ctx, all, 5*time.Second)
	serverPID := r.s.Server.PID()
	idle, _ := proc.RSS(serverPID)
	out.RSSIdleMB = mb(idle)
	maxRSS := idle
	stopRSS := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopRSS:
				return
			case <-t.C:
				if v, err := proc.RSS(serverPID); err == nil && v > maxRSS {
					maxRSS = v
				}
			}
		}
	}()
	cl, err := client(req, ol.inFlight())
	if err != nil {
		return err
	}
	meter := &proc.Meter{PIDs: sd.pids, Commands: stackCommands}
	var during *load.Histogram
	var duringErr error
	duringCtx, endDuring := context.WithCancel(ctx)
	defer endDuring()
	start := func() {
		meter.Start()
		if ol.During != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				during, duringErr = ol.During(duringCtx, r.s)
			}()
		}
	}
	end := func() {
		meter.End()
		endDuring()
	}
	res, err := load.Open(ctx, cl, req, ol.Rate, ol.inFlight(), load.Window{
		Warmup: r.o.Warmup, Duration: r.o.Duration, OnStart: start, OnEnd: end})
	endDuring()
	close(stopRSS)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("open loop %s: %w", ol.Label(), err)
	}
	if duringErr != nil {
		return fmt.Errorf("open loop %s: during: %w", ol.Label(), duringErr)
	}
	if during != nil {
		d := during.Summary()
		out.During = &d
		r.logf("%s: open loop %s: end to end p50 %.2f p99 %.2f ms over %d markers", r.b.Name, ol.Label(), d.P50Ms, d.P99Ms, d.Count)
	}
	out.System = res
	out.CPUUsPerOp = meter.PerOp(float64(res.OK) * float64(req.Ops()))
	if s, ok := out.CPUUsPerOp["server"]; ok {
		out.CPUUsPerOp["server+broker"] = round3(s + out.CPUUsPerOp["broker"])
	}
	out.RSSMaxMB, out.RSSAddedMB = mb(maxRSS), mb(maxRSS-idle)
	r.logf("%s: open loop %s: p50 %.2f p99 %.2f p999 %.2f ms, %d ok, %d failed, rss %.0f MB (+%.0f)", r.b.Name, ol.Label(),
		res.Latency.P50Ms, res.Latency.P99Ms, res.Latency.P999Ms, res.OK, res.Non2xx+res.Errors, out.RSSMaxMB, out.RSSAddedMB)
	if !ol.NoBaseline && len(r.bases) > 0 && r.bases[0].http {
		bs := r.bases[0]
		settle(ctx, all, 5*time.Second)
		bcl, err := client(bs.req, ol.inFlight())
		if err != nil {
			return err
		}
		bres, err := load.Open(ctx, bcl, bs.req, ol.Rate, ol.inFlight(), load.Window{Warmup: r.o.Warmup, Duration: r.o.Duration})
		if err != nil {
			return fmt.Errorf("open loop %s on %s: %w", ol.Label(), bs.name, err)
		}
		out.Baseline = bres
		r.logf("%s: open loop %s on %s: p50 %.2f p99 %.2f p999 %.2f ms", r.b.Name, ol.Label(), bs.name,
			bres.Latency.P50Ms, bres.Latency.P99Ms, bres.Latency.P999Ms)
	}
	r.rep.OpenLoop = append(r.rep.OpenLoop, out)
	return nil
}

func mb(b int64) float64 { return math.Round(float64(b)/(1<<20)*10) / 10 }

// settle waits until the processes together use less than 10% of a core
// over 250 ms, or max passes, and returns how long it waited.
func settle(ctx context.Context, pids []int, max time.Duration) time.Duration {
	t0 := time.Now()
	total := func() time.Duration {
		var sum time.Duration
		for _, pid := range pids {
			if c, err := proc.CPU(pid); err == nil {
				sum += c
			}
		}
		return sum
	}
	for time.Since(t0) < max && ctx.Err() == nil {
		a := total()
		time.Sleep(250 * time.Millisecond)
		if total()-a <= 25*time.Millisecond {
			break
		}
	}
	return time.Since(t0)
}

// evaluate compares the figures with the targets.
func (r *runner) evaluate() {
	rep, t := r.rep, r.b.Targets
	if len(rep.Pairs) > 0 {
		rep.check("pairs stable", fmt.Sprintf("%d pairs within 25%% of the baseline median", r.o.Pairs), float64(len(acceptedOf(rep.Pairs))), rep.Stable)
		if t.MinRatio > 0 {
			rep.check("ratio", fmt.Sprintf("≥ %g", t.MinRatio), rep.Ratio, rep.Ratio >= t.MinRatio)
		}
		if t.MinOpsPerSec > 0 {
			rep.check("system ops/s", fmt.Sprintf("≥ %g", t.MinOpsPerSec), rep.Median.SystemOpsPerSec, rep.Median.SystemOpsPerSec >= t.MinOpsPerSec)
		}
		if t.MaxCPUPerOpUs > 0 {
			c := rep.Median.SystemCPUUsPerOp["server+broker"]
			rep.check("cpu µs/op server+broker", fmt.Sprintf("≤ %g", t.MaxCPUPerOpUs), c, c > 0 && c <= t.MaxCPUPerOpUs)
		}
		var bad, all uint64
		for _, run := range rep.Runs {
			if run.Side == "system" && run.Load != nil {
				bad += run.Load.Non2xx + run.Load.Errors
				all += run.Load.Requests
			}
		}
		rate := 0.0
		if all > 0 {
			rate = float64(bad) / float64(all)
		}
		rep.check("system failed requests (closed loop)", "≤ 0.1%", rate*100, rate <= 0.001)
	}
	for i, o := range rep.OpenLoop {
		ol := r.b.OpenLoop[i]
		l := o.System.Latency
		if ol.P50Max > 0 {
			rep.latencyCheck("p50 ms at "+o.Label, ol.P50Max, l.P50Ms, o.Baseline, func(s load.Summary) float64 { return s.P50Ms })
		}
		if ol.P99Max > 0 {
			rep.latencyCheck("p99 ms at "+o.Label, ol.P99Max, l.P99Ms, o.Baseline, func(s load.Summary) float64 { return s.P99Ms })
		}
		if ol.RSSMaxMB > 0 {
			rep.check("rss MB at "+o.Label, fmt.Sprintf("≤ %g", ol.RSSMaxMB), o.RSSMaxMB, o.RSSMaxMB <= ol.RSSMaxMB)
		}
		if ol.DuringP99Max > 0 {
			p99, ok := 0.0, o.During != nil && o.During.Count > 0
			if ok {
				p99 = o.During.P99Ms
			}
			rep.check("end-to-end p99 ms at "+o.Label, fmt.Sprintf("≤ %g", load.Ms(ol.DuringP99Max)), p99, ok && p99 <= load.Ms(ol.DuringP99Max))
		}
		bad := float64(o.System.Non2xx + o.System.Errors)
		rate := 0.0
		if o.System.Requests > 0 {
			rate = bad / float64(o.System.Requests)
		}
		rep.check("failed requests at "+o.Label, "≤ 0.1%", rate*100, rate <= 0.001)
	}
	rep.Pass = true
	for _, c := range rep.Checks {
		rep.Pass = rep.Pass && c.Pass
	}
}
