package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// MeasureBaselines measures each named baseline once (closed loop for HTTP
// ones) and returns a report whose Runs hold the samples; baselines whose
// stack piece is missing are noted in Error and skipped.
func MeasureBaselines(ctx context.Context, b *Benchmark, o Options, names []string) *Report {
	r := &runner{o: o, b: b, conns: o.Conns}
	r.rep = &Report{
		Name: b.Name, Doc: b.Doc, Started: time.Now(), Command: o.Command, Machine: ReadMachine(), Baselines: names,
		Config: Config{WarmupSec: o.Warmup.Seconds(), DurationSec: o.Duration.Seconds(), Conns: o.Conns, ServerProcs: o.ServerProcs, Stack: o.Stack},
	}
	var problems []string
	dir, err := os.MkdirTemp("", "sendstream-bench-baselines-")
	if err != nil {
		r.rep.Error = err.Error()
		return r.rep
	}
	r.dir = dir
	for _, name := range names {
		if ctx.Err() != nil {
			break
		}
		r.b = &Benchmark{Name: b.Name, Baselines: []string{name}}
		r.bases = nil
		if err := r.startBaselines(ctx); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if o.Log != nil {
			fmt.Fprintf(o.Log, "baseline %s…\n", name)
		}
		if _, err := r.measure(ctx, 1, "baseline", r.bases[0]); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
		}
		r.stop()
		r.procs = nil
	}
	r.b = b
	r.rep.Finished = time.Now()
	r.rep.Pass = len(problems) == 0
	r.rep.Error = strings.Join(problems, "; ")
	if !o.Keep && len(problems) == 0 {
		os.RemoveAll(dir)
	}
	return r.rep
}
