package harness

import (
	"context"
	"fmt"
	"time"

	"sendstream/bench/proc"
)

// CustomRun is what a benchmark's Custom hook gets: the run's timing, a
// meter factory for the system's processes, and the report to add its
// phases and checks to.
type CustomRun struct {
	Warmup   time.Duration // -warmup
	Duration time.Duration // -duration: the measured window of one phase
	Pairs    int           // -pairs: for a custom run that alternates its own pairs
	rep      *Report
	r        *runner
}

// Phase is one measured stage of a custom benchmark (e.g. a sustained
// rate, then the same with a faulty receiver): its figures by name, CPU µs
// per operation by process role (as in Sample.CPUUsPerOp, "machine"
// included), and a one-line note for the summary.
type Phase struct {
	Name       string             `json:"name"`
	Note       string             `json:"note"`
	Figures    map[string]float64 `json:"figures,omitempty"`
	CPUUsPerOp map[string]float64 `json:"cpuUsPerOp,omitempty"`
	StealPct   float64            `json:"stealPct"`
	// Samples are raw series (e.g. the rate of each slice of the window).
	Samples map[string][]float64 `json:"samples,omitempty"`
}

// Meter returns a meter of the system's processes (server, broker, this
// process as "generator") and of the local stack's Postgres and
// ClickHouse; its PerOp includes "machine", the whole host.
func (c *CustomRun) Meter() *proc.Meter {
	return &proc.Meter{PIDs: c.r.s.PIDs(), Commands: stackCommands}
}

// Settle waits (up to 5 s) until the server and broker are idle.
func (c *CustomRun) Settle(ctx context.Context) {
	settle(ctx, c.r.settlePIDs(), 5*time.Second)
}

// Logf prints a progress line prefixed with the benchmark's name.
func (c *CustomRun) Logf(format string, args ...any) {
	c.r.logf("%s: %s", c.r.b.Name, fmt.Sprintf(format, args...))
}

// AddPhase records a measured phase in the report.
func (c *CustomRun) AddPhase(p Phase) {
	for k, v := range p.Figures {
		p.Figures[k] = round3(v)
	}
	c.rep.Phases = append(c.rep.Phases, p)
	c.Logf("%s: %s", p.Name, p.Note)
}

// Check records a target compared with its measurement; the benchmark
// passes only when every check does.
func (c *CustomRun) Check(name, target string, actual float64, pass bool) {
	c.rep.check(name, target, actual, pass)
}

// custom runs the benchmark's Custom hook.
func (r *runner) custom(ctx context.Context) error {
	c := &CustomRun{Warmup: r.o.Warmup, Duration: r.o.Duration, Pairs: r.o.Pairs, rep: r.rep, r: r}
	if err := r.b.Custom(ctx, r.s, c); err != nil {
		return fmt.Errorf("%s: %w", r.b.Name, err)
	}
	if len(r.rep.Checks) == 0 {
		return fmt.Errorf("%s: the custom run recorded no check", r.b.Name)
	}
	return nil
}
