package harness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall"
	"time"
)

// This file holds the A/B mode: one benchmark measured with two sendstream
// binaries in one run, so that both meet the same machine noise within
// seconds of each other.

// ABReport is an A/B run: the report of each binary (its pairs share the
// baseline samples) and, per pair, the rate of B over the rate of A.
type ABReport struct {
	Name    string    `json:"name"`
	Started time.Time `json:"started"`
	BinA    string    `json:"binA"`
	BinB    string    `json:"binB"`
	// RateRatios are B's system rate over A's, per pair: the baseline does
	// not enter them.
	RateRatios []float64 `json:"rateRatios"`
	// CPURatios are B's server+broker CPU µs per operation over A's, per pair.
	CPURatios []float64 `json:"cpuRatios"`
	// Void counts pairs left out because a side completed no operation.
	Void      int     `json:"void,omitempty"`
	Median    float64 `json:"median"`    // median of RateRatios
	MedianCPU float64 `json:"medianCpu"` // median of CPURatios
	A         *Report `json:"a"`
	B         *Report `json:"b"`
	Error     string  `json:"error,omitempty"`
	File      string  `json:"-"`
}

// RunAB measures b's pairs with binary binA (system A) and o.Bin (system B)
// in one run. Both systems start once, each with its own broker and fresh
// databases. Every pair measures the baselines, then A and B, in the
// reverse order on even pairs; while one system is measured, the other's
// server and broker are stopped (SIGSTOP), so that it takes no CPU, and
// each measurement first waits for its own processes to settle. Open-loop
// and custom phases are not run. It does not write the report.
func RunAB(ctx context.Context, b *Benchmark, o Options, binA string) *ABReport {
	oa := o
	oa.Bin = binA
	ra, rb := newRunner(b, oa, "_a"), newRunner(b, o, "_b")
	ab := &ABReport{Name: b.Name, Started: time.Now(), BinA: binA, BinB: o.Bin, A: ra.rep, B: rb.rep}
	err := ab.run(ctx, ra, rb)
	for _, r := range []*runner{ra, rb} {
		if r.s != nil {
			r.s.Resume()
		}
		r.stop()
		r.finish(err)
	}
	if err != nil {
		ab.Error = err.Error()
	}
	return ab
}

func (ab *ABReport) run(ctx context.Context, ra, rb *runner) error {
	b := ra.b
	if b.SelfTest || len(b.Baselines) == 0 || b.Request == nil && b.Work == nil {
		return errors.New("A/B mode needs a benchmark measured in pairs against a baseline")
	}
	for _, r := range []*runner{ra, rb} {
		if err := r.setup(ctx); err != nil {
			return fmt.Errorf("system %s: %w", r.o.Bin, err)
		}
	}
	pa, pb := noRejects(ra.o.Pairs), noRejects(rb.o.Pairs)
	for i := 1; i <= ra.o.Pairs; i++ {
		ra.s.Pause()
		rb.s.Pause()
		slowest, steal, err := rb.measureBaselines(ctx, i)
		if err != nil {
			return err
		}
		ra.rep.Runs = append(ra.rep.Runs, rb.rep.Runs[len(rb.rep.Runs)-len(rb.bases):]...)
		order := []*runner{ra, rb}
		if i%2 == 0 {
			order = []*runner{rb, ra}
		}
		runs := map[*runner]*Sample{}
		for _, r := range order {
			other := ra
			if r == ra {
				other = rb
			}
			other.s.Pause()
			r.s.Resume()
			run, err := r.measure(ctx, i, "system", r.sys)
			if err != nil {
				return err
			}
			runs[r] = run
		}
		pa.AddWithSteal(slowest, runs[ra].OpsPerSec, steal, runs[ra].StealPct)
		pb.AddWithSteal(slowest, runs[rb].OpsPerSec, steal, runs[rb].StealPct)
		ra.logf("%s: A/B pair %d: baseline %s, A %s, B %s", b.Name, i, si(slowest), si(runs[ra].OpsPerSec), si(runs[rb].OpsPerSec))
		if runs[ra].OpsPerSec <= 0 || runs[rb].OpsPerSec <= 0 {
			ab.Void++ // a side that did nothing has no ratio
			continue
		}
		ab.RateRatios = append(ab.RateRatios, round3(runs[rb].OpsPerSec/runs[ra].OpsPerSec))
		if ca, cb := runs[ra].CPUUsPerOp["server+broker"], runs[rb].CPUUsPerOp["server+broker"]; ca > 0 && cb > 0 {
			ab.CPURatios = append(ab.CPURatios, round3(cb/ca))
		}
	}
	if len(ab.RateRatios) == 0 {
		return errors.New("no pair where both systems did any work")
	}
	for _, x := range []struct {
		r *runner
		p *Pairing
	}{{ra, pa}, {rb, pb}} {
		x.r.rep.Pairs, x.r.rep.Stable, x.r.rep.Ratio = x.p.Pairs, x.p.Stable(), round3(x.p.MedianRatio())
		x.r.medians(x.p)
		x.r.evaluate()
	}
	ab.Median, ab.MedianCPU = round3(Median(ab.RateRatios)), round3(Median(ab.CPURatios))
	return nil
}

// noRejects is a pairing of n pairs that counts every pair: in A/B mode
// the baseline only reports each binary's ratio.
func noRejects(n int) *Pairing {
	return &Pairing{Want: n, MaxAttempts: n, Tolerance: math.Inf(1)}
}

// measureBaselines measures every baseline once and returns the slowest
// rate and the largest steal.
func (r *runner) measureBaselines(ctx context.Context, attempt int) (float64, float64, error) {
	slowest, steal := math.Inf(1), 0.0
	for _, bs := range r.bases {
		run, err := r.measure(ctx, attempt, "baseline", bs)
		if err != nil {
			return 0, 0, err
		}
		slowest, steal = math.Min(slowest, run.OpsPerSec), math.Max(steal, run.StealPct)
	}
	return slowest, steal, nil
}

// Write saves the A/B report as NAME-ab-TIMESTAMP.json in dir.
func (ab *ABReport) Write(dir string) error {
	path, err := writeJSON(dir, fmt.Sprintf("%s-ab-%s.json", ab.Name, ab.Started.UTC().Format("20060102T150405Z")), ab)
	if err != nil {
		return fmt.Errorf("A/B report: %w", err)
	}
	ab.File = path
	return nil
}

// Summary is the A/B report in one line.
func (ab *ABReport) Summary() string {
	if ab.Error != "" {
		return fmt.Sprintf("%s: A/B ERROR %s", ab.Name, ab.Error)
	}
	pairs := make([]string, len(ab.RateRatios))
	for i, x := range ab.RateRatios {
		pairs[i] = fmt.Sprintf("%.3f", x)
	}
	void := ""
	if ab.Void > 0 {
		void = fmt.Sprintf(", %d left out: a side did nothing", ab.Void)
	}
	return fmt.Sprintf("%s: A/B rate B/A median %.3f (pairs %s%s) | server+broker cpu/op B/A %.3f | ratio to baseline A %.3f, B %.3f | %s",
		ab.Name, ab.Median, strings.Join(pairs, " "), void, ab.MedianCPU, ab.A.Ratio, ab.B.Ratio, ab.File)
}

// Pause stops the system's server and broker (SIGSTOP).
func (s *System) Pause() { s.signal(syscall.SIGSTOP) }

// Resume lets a paused system's server and broker run again (SIGCONT).
func (s *System) Resume() { s.signal(syscall.SIGCONT) }

func (s *System) signal(sig syscall.Signal) {
	for _, p := range []*Process{s.Server, s.Broker} {
		if p != nil && !p.Exited() {
			_ = syscall.Kill(p.PID(), sig)
		}
	}
}
