// Command bench runs Sendstream's benchmarks (`make bench`): each registered
// benchmark starts its system under test and frozen baselines in their own
// processes, measures them in alternating pairs with one load generator, and
// writes JSON results under bench/results/. See bench/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"sendstream/bench/baseline"
	"sendstream/bench/harness"
)

func main() {
	if handled, code := harness.ChildMain(os.Args[1:]); handled {
		os.Exit(code)
	}
	os.Exit(run())
}

func run() int {
	runFlag := flag.String("run", "", "comma-separated benchmark names (default: every non-manual benchmark whose system exists)")
	duration := flag.Duration("duration", 10*time.Second, "measured length of each run")
	warmup := flag.Duration("warmup", 2*time.Second, "warm-up before each run (not measured)")
	pairs := flag.Int("pairs", 3, "baseline/system pairs that must agree (a pair whose baseline strays >25% is redone)")
	conns := flag.Int("conns", 64, "closed-loop connections")
	procs := flag.Int("gomaxprocs", 2, "GOMAXPROCS of the server under test and of the baselines")
	out := flag.String("out", "", "results directory (default <repo>/bench/results)")
	keep := flag.Bool("keep", false, "keep scratch directories (server, broker and baseline logs) and the run's databases")
	list := flag.Bool("list", false, "list benchmarks and baselines, then exit")
	binFlag := flag.String("bin", "", "use this sendstream binary instead of building bin/sendstream (e.g. to compare builds)")
	abFlag := flag.String("ab", "", "A/B mode: alternate this sendstream binary (A) with -bin or bin/sendstream (B) in every pair of one run, the idle one paused; reports B's rate over A's per pair")
	cpuprofile := flag.String("cpuprofile", "", "write the load generator's (this process's) CPU profile to this file")
	baselines := flag.String("baselines", "", "measure these baselines once (comma-separated, or \"all\") instead of running benchmarks")
	flag.Parse()

	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	root, err := harness.FindRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	if *list {
		printList(root)
		return 0
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if *pairs < 1 || *conns < 1 || *duration <= 0 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "bench: -pairs and -conns must be ≥ 1, -duration > 0, -warmup ≥ 0")
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: find own executable:", err)
		return 2
	}
	if *out == "" {
		*out = filepath.Join(root, "bench", "results")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := harness.Options{
		Root: root, Self: self, Stack: harness.LoadStackEnv(root),
		Warmup: *warmup, Duration: *duration, Pairs: *pairs, Conns: *conns, ServerProcs: *procs,
		Keep: *keep, Command: os.Args, Log: os.Stderr,
	}
	if *baselines != "" {
		return measureBaselines(ctx, opts, *baselines, *out)
	}

	selected, err := selectBenchmarks(*runFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	needBin := false
	for _, b := range selected {
		if !b.SelfTest && b.Exists(root) == nil {
			needBin = true
		}
		for _, n := range b.Baselines {
			if bl, err := baseline.Get(n); err == nil && needsBroker(bl) {
				needBin = true
			}
		}
	}
	if needBin && *binFlag != "" {
		if opts.Bin, err = filepath.Abs(*binFlag); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
	} else if needBin {
		fmt.Fprintln(os.Stderr, "bench: go build -o bin/sendstream .")
		if opts.Bin, opts.BuildErr = harness.Build(ctx, root); opts.BuildErr != nil {
			fmt.Fprintln(os.Stderr, "bench:", opts.BuildErr)
		}
	}
	code := 0
	var summaries []string
	explicit := *runFlag != ""
	for _, b := range selected {
		if ctx.Err() != nil {
			break
		}
		if err := b.Exists(root); err != nil && !explicit {
			line := fmt.Sprintf("%s: SKIP %v", b.Name, err)
			fmt.Println(line)
			summaries = append(summaries, line)
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s: %s\n", b.Name, b.Doc)
		if *abFlag != "" {
			line, ok := runAB(ctx, b, opts, *abFlag, *out)
			if !ok {
				code = 1
			}
			fmt.Println(line)
			summaries = append(summaries, line)
			continue
		}
		rep := harness.Run(ctx, b, opts)
		if rep.Skipped == "" {
			if err := rep.Write(*out); err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				code = 1
			}
			if !rep.Pass {
				code = 1
			}
		} else if explicit {
			code = 1
		}
		fmt.Println(rep.Summary())
		summaries = append(summaries, rep.Summary())
	}
	if len(summaries) > 1 {
		fmt.Println("== summary ==")
		for _, s := range summaries {
			fmt.Println(s)
		}
	}
	if len(summaries) == 0 {
		fmt.Println("bench: no benchmark selected")
	}
	return code
}

// selectBenchmarks returns the named benchmarks, or every non-manual one.
func selectBenchmarks(names string) ([]*harness.Benchmark, error) {
	all := harness.Benchmarks()
	if names == "" {
		var out []*harness.Benchmark
		for _, b := range all {
			if !b.Manual {
				out = append(out, b)
			}
		}
		return out, nil
	}
	byName := map[string]*harness.Benchmark{}
	for _, b := range all {
		byName[b.Name] = b
	}
	var out []*harness.Benchmark
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		b, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("no benchmark %q (go run ./bench -list)", n)
		}
		out = append(out, b)
	}
	return out, nil
}

func printList(root string) {
	fmt.Println("benchmarks:")
	for _, b := range harness.Benchmarks() {
		state := "ready"
		if err := b.Exists(root); err != nil {
			state = err.Error()
		}
		if b.Manual {
			state += ", manual"
		}
		fmt.Printf("  %-18s %s [baselines: %s] (%s)\n", b.Name, b.Doc, strings.Join(b.Baselines, ","), state)
	}
	fmt.Println("baselines (FROZEN):")
	for _, n := range baseline.Names() {
		b, _ := baseline.Get(n)
		fmt.Printf("  %-18s %s\n", n, b.Doc)
	}
}

// measureBaselines measures each named baseline once and prints its figure:
// a check of the machine against PERFORMANCE.md's ceilings.
func measureBaselines(ctx context.Context, o harness.Options, names, out string) int {
	list := baseline.Names()
	if names != "all" {
		list = strings.Split(names, ",")
	}
	sort.Strings(list)
	for _, n := range list {
		if bl, err := baseline.Get(n); err == nil && needsBroker(bl) && o.Bin == "" {
			fmt.Fprintln(os.Stderr, "bench: go build -o bin/sendstream . (for the broker)")
			if o.Bin, o.BuildErr = harness.Build(ctx, o.Root); o.BuildErr != nil {
				fmt.Fprintln(os.Stderr, "bench:", o.BuildErr)
			}
		}
	}
	b := &harness.Benchmark{Name: "baselines", Doc: "each frozen baseline measured once"}
	rep := harness.MeasureBaselines(ctx, b, o, list)
	if err := rep.Write(out); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	for _, s := range rep.Runs {
		line := fmt.Sprintf("%-18s %10.0f %s/s", s.Name, s.OpsPerSec, unitOf(s.Name))
		if s.Load != nil {
			line += fmt.Sprintf("  p50 %.2f p99 %.2f ms (closed loop, c%d)", s.Load.Latency.P50Ms, s.Load.Latency.P99Ms, s.Load.Conns)
		}
		if c, ok := s.CPUUsPerOp["server"]; ok {
			line += fmt.Sprintf("  server %.1f µs/op, generator %.1f µs/req", c, s.GeneratorUsPerReq)
		}
		if c, ok := s.CPUUsPerOp["baseline"]; ok {
			line += fmt.Sprintf("  %.1f µs CPU/op", c)
		}
		fmt.Println(line)
	}
	if rep.Error != "" {
		fmt.Println("error:", rep.Error)
		return 1
	}
	fmt.Println(rep.File)
	return 0
}

func needsBroker(b *baseline.Baseline) bool {
	for _, n := range b.Needs {
		if n == baseline.NeedBroker {
			return true
		}
	}
	return false
}

func unitOf(name string) string {
	if b, err := baseline.Get(name); err == nil {
		return b.Unit
	}
	return "ops"
}

// runAB runs b in A/B mode against binary binA and writes the A/B report;
// it returns the summary line and whether the run completed.
func runAB(ctx context.Context, b *harness.Benchmark, opts harness.Options, binA, out string) (string, bool) {
	abs, err := filepath.Abs(binA)
	if err != nil {
		return fmt.Sprintf("%s: A/B ERROR %v", b.Name, err), false
	}
	ab := harness.RunAB(ctx, b, opts, abs)
	ok := ab.Error == ""
	if ok {
		if err := ab.Write(out); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			ok = false
		}
	}
	return ab.Summary(), ok
}
