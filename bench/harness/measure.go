package harness

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"sendstream/bench/baseline"
	"sendstream/bench/load"
	"sendstream/bench/proc"
)

// stackCommands are the local stack's processes measured by command name
// on both sides of a pair (a baseline uses them too when it needs them).
var stackCommands = map[string]string{"postgres": "postgres", "clickhouse": "clickhouse-serv"}

// pairs measures baseline, system, baseline, system … until the pairing is
// done.
func (r *runner) pairs(ctx context.Context) error {
	p := NewPairing(r.o.Pairs)
	p.Tolerance, p.MaxStealGap = r.o.tolerance(), r.o.maxStealGap()
	for !p.Done() {
		attempt := len(p.Pairs) + 1
		slowest, steal, err := r.measureBaselines(ctx, attempt)
		if err != nil {
			return err
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
