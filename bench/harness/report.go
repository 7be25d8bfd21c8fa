package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sendstream/bench/baseline"
	"sendstream/bench/load"
)

// Report is the JSON result of one benchmark, written to
// bench/results/<name>-<timestamp>.json.
type Report struct {
	Name      string    `json:"name"`
	Doc       string    `json:"doc"`
	Issue     int       `json:"issue,omitempty"`
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	Command   []string  `json:"command"`
	Machine   Machine   `json:"machine"`
	Config    Config    `json:"config"`
	Baselines []string  `json:"baselines"`
	Targets   Targets   `json:"targets"`

	// Runs are the raw samples, in the order they were taken.
	Runs []Sample `json:"runs"`
	// Pairs are every pair with its ratio; rejected ones say why.
	Pairs  []Pair `json:"pairs"`
	Stable bool   `json:"stable"` // enough pairs were accepted

	Ratio  float64 `json:"ratio"` // median per-pair ratio of the accepted pairs
	Median Medians `json:"median"`

	OpenLoop []OpenLoopRun `json:"openLoop,omitempty"`
	// Phases are a custom benchmark's measured phases (Benchmark.Custom).
	Phases []Phase `json:"phases,omitempty"`

	Checks  []Check `json:"checks"`
	Pass    bool    `json:"pass"`
	Skipped string  `json:"skipped,omitempty"`
	Error   string  `json:"error,omitempty"`
	File    string  `json:"-"`
}

// Config is how the benchmark was run.
type Config struct {
	WarmupSec   float64  `json:"warmupSec"`
	DurationSec float64  `json:"durationSec"`
	Pairs       int      `json:"pairs"`
	Conns       int      `json:"conns"`
	ServerProcs int      `json:"serverGomaxprocs"`
	Tolerance   float64  `json:"baselineTolerance"`
	Stack       StackEnv `json:"stack"`
}

// Sample is one measured run (one side of a pair, or one baseline of it).
type Sample struct {
	Pair      int       `json:"pair"` // attempt number of the pair
	Side      string    `json:"side"` // "baseline" or "system"
	Name      string    `json:"name"` // baseline name, or the benchmark's
	Started   time.Time `json:"started"`
	SettleMs  int64     `json:"settleMs"` // waited for the processes to go idle first
	OpsPerSec float64   `json:"opsPerSec"`
	// CPUUsPerOp is CPU µs per operation by process role: server, broker,
	// generator (the load generator: this process), baseline (a work
	// baseline's own process, everything included), postgres and
	// clickhouse (every process of the local stack's servers), machine
	// (every process on the host).
	CPUUsPerOp        map[string]float64 `json:"cpuUsPerOp,omitempty"`
	GeneratorUsPerReq float64            `json:"generatorCpuUsPerRequest,omitempty"`
	// StealPct is the share of the machine's CPU time taken by other
	// guests during the run (proc.Meter.StealPercent); for a work baseline,
	// over its whole child process, warm-up included.
	StealPct float64              `json:"stealPct"`
	Load     *load.Result         `json:"load,omitempty"`
	Work     *baseline.WorkResult `json:"work,omitempty"`
}

// Medians summarises the accepted pairs.
type Medians struct {
	BaselineOpsPerSec  float64            `json:"baselineOpsPerSec"`
	SystemOpsPerSec    float64            `json:"systemOpsPerSec"`
	SystemCPUUsPerOp   map[string]float64 `json:"systemCpuUsPerOp,omitempty"` // by role, plus "server+broker"
	BaselineCPUUsPerOp map[string]float64 `json:"baselineCpuUsPerOp,omitempty"`
	GeneratorUsPerReq  float64            `json:"generatorCpuUsPerRequest,omitempty"`
	Unit               string             `json:"unit"`
}

// OpenLoopRun is one fixed-rate measurement of the system (and of the HTTP
// baseline at the same rate, for reference).
type OpenLoopRun struct {
	Label      string             `json:"label"`
	Rate       float64            `json:"rate"`
	System     *load.Result       `json:"system"`
	CPUUsPerOp map[string]float64 `json:"cpuUsPerOp,omitempty"`
	RSSIdleMB  float64            `json:"rssIdleMB"`
	RSSMaxMB   float64            `json:"rssMaxMB"`
	RSSAddedMB float64            `json:"rssAddedMB"`
	Baseline   *load.Result       `json:"baseline,omitempty"`
	// During is the latency distribution the benchmark's During hook
	// observed (end to end), when it has one.
	During *load.Summary `json:"during,omitempty"`
}

// Check is one target compared with its measurement.
type Check struct {
	Name   string  `json:"name"`
	Target string  `json:"target"`
	Actual float64 `json:"actual"`
	Pass   bool    `json:"pass"`
	// Baseline is the bare baseline's value of the same measure in the same
	// run (open-loop latencies at the same rate), when it has one.
	Baseline float64 `json:"baseline,omitempty"`
	// BaselineMissed: the baseline misses the target too, so this host
	// cannot judge the line (the verdict stands; the summary says so).
	BaselineMissed bool `json:"baselineMissed,omitempty"`
}

func (r *Report) check(name, target string, actual float64, pass bool) {
	r.Checks = append(r.Checks, Check{Name: name, Target: target, Actual: round3(actual), Pass: pass})
}

// latencyCheck adds the check "name ≤ limit ms" of an open-loop latency,
// with the bare baseline's value at the same rate (nil: not measured).
func (r *Report) latencyCheck(name string, limit time.Duration, actual float64, baseline *load.Result, of func(load.Summary) float64) {
	ms := load.Ms(limit)
	c := Check{Name: name, Target: fmt.Sprintf("≤ %g", ms), Actual: round3(actual), Pass: actual <= ms}
	if baseline != nil {
		c.Baseline = round3(of(baseline.Latency))
		c.BaselineMissed = c.Baseline > ms
	}
	r.Checks = append(r.Checks, c)
}

// Write stores the report as JSON in dir and remembers the file name.
func (r *Report) Write(dir string) error {
	path, err := writeJSON(dir, fmt.Sprintf("%s-%s.json", r.Name, r.Started.UTC().Format("20060102T150405Z")), r)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	r.File = path
	return nil
}

// writeJSON writes v, indented, to dir/name (creating dir) and returns the
// file's path.
func writeJSON(dir, name string, v any) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("results dir: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode: %w", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	return path, nil
}

// Summary is the one-line verdict printed for the benchmark.
func (r *Report) Summary() string {
	var b strings.Builder
	verdict := "PASS"
	switch {
	case r.Skipped != "":
		return fmt.Sprintf("%s: SKIP %s", r.Name, r.Skipped)
	case r.Error != "":
		verdict = "ERROR"
	case !r.Pass:
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "%s: %s", r.Name, verdict)
	if len(r.Pairs) > 0 {
		fmt.Fprintf(&b, " ratio %.2f", r.Ratio)
		if r.Targets.MinRatio > 0 {
			fmt.Fprintf(&b, " (target ≥%.2f)", r.Targets.MinRatio)
		}
		fmt.Fprintf(&b, " | system %s vs %s %s %s/s", si(r.Median.SystemOpsPerSec), strings.Join(r.Baselines, "/"),
			si(r.Median.BaselineOpsPerSec), r.Median.Unit)
		if c, ok := r.Median.SystemCPUUsPerOp["server+broker"]; ok {
			fmt.Fprintf(&b, " | cpu server+broker %.1f µs/op", c)
		}
		if r.Median.GeneratorUsPerReq > 0 {
			fmt.Fprintf(&b, ", generator %.1f µs/req", r.Median.GeneratorUsPerReq)
		}
		fmt.Fprintf(&b, " | %d/%d pairs", len(acceptedOf(r.Pairs)), len(r.Pairs))
	}
	for _, o := range r.OpenLoop {
		if o.System == nil {
			continue
		}
		fmt.Fprintf(&b, " | open %s p50 %.2f p99 %.2f p999 %.2f ms", o.Label, o.System.Latency.P50Ms, o.System.Latency.P99Ms, o.System.Latency.P999Ms)
		if o.RSSMaxMB > 0 {
			fmt.Fprintf(&b, ", rss %.0f MB (+%.0f)", o.RSSMaxMB, o.RSSAddedMB)
		}
	}
	for _, p := range r.Phases {
		fmt.Fprintf(&b, " | %s: %s", p.Name, p.Note)
	}
	for _, c := range r.Checks {
		if !c.Pass {
			fmt.Fprintf(&b, " | missed %s: %g (target %s)", c.Name, c.Actual, c.Target)
			if c.BaselineMissed {
				fmt.Fprintf(&b, "; the bare baseline misses it too (%g), so this host cannot judge the line", c.Baseline)
			}
		}
	}
	if r.Error != "" {
		fmt.Fprintf(&b, " | error: %s", firstLine(r.Error))
	}
	if r.File != "" {
		fmt.Fprintf(&b, " | %s", r.File)
	}
	return b.String()
}

func acceptedOf(ps []Pair) []Pair {
	var out []Pair
	for _, p := range ps {
		if !p.Rejected {
			out = append(out, p)
		}
	}
	return out
}

// si formats a rate with a k/M suffix.
func si(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.1fk", x/1e3)
	default:
		return fmt.Sprintf("%.0f", x)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
