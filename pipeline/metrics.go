package pipeline

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMetrics is the process-wide registry that the producer, the runner,
// the breakers and the ingest tier write to and that /metrics serves.
var DefaultMetrics = NewRegistry()

// DefaultBuckets are the histogram buckets used when none are given: seconds,
// from 100µs to 10s.
var DefaultBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Registry holds metrics and writes them in the Prometheus text format.
// Resolving a metric (Counter, Gauge, Histogram) takes a lock and should be
// done once, at set-up; updating the returned value is lock-free and safe for
// concurrent use.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family
}

type metricKind int

const (
	kindCounter metricKind = iota
	kindGauge
	kindHistogram
)

func (k metricKind) String() string {
	switch k {
	case kindCounter:
		return "counter"
	case kindGauge:
		return "gauge"
	default:
		return "histogram"
	}
}

type family struct {
	name    string
	help    string
	kind    metricKind
	buckets []float64
	series  map[string]any // rendered label set -> *Counter | *Gauge | *Histogram | gaugeFunc
}

type gaugeFunc func() float64

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{families: map[string]*family{}}
}

// Counter is a monotonically increasing count.
type Counter struct{ v atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Value returns the current count.
func (c *Counter) Value() uint64 { return c.v.Load() }

// Gauge is a value that goes up and down.
type Gauge struct{ bits atomic.Uint64 }

// Set sets the value.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Add adds d (which may be negative).
func (g *Gauge) Add(d float64) {
	for {
		old := g.bits.Load()
		if g.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Value returns the current value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

// Histogram counts observations into fixed buckets.
type Histogram struct {
	upper  []float64 // shared with the family, read-only
	counts []atomic.Uint64
	count  atomic.Uint64
	sum    Gauge
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.upper, v) // first bucket with upper >= v
	if i < len(h.counts) {
		h.counts[i].Add(1)
	}
	h.count.Add(1)
	h.sum.Add(v)
}

// ObserveSince records the seconds elapsed since t.
func (h *Histogram) ObserveSince(t time.Time) { h.Observe(time.Since(t).Seconds()) }

// Count returns the number of observations.
func (h *Histogram) Count() uint64 { return h.count.Load() }

// Help sets the HELP text of a metric family (created on first use).
func (r *Registry) Help(name, help string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.families[name]; ok {
		f.help = help
		return
	}
	// Remember the help for when the family is created.
	r.families[name] = &family{name: name, help: help, kind: -1, series: map[string]any{}}
}

// Counter returns the counter with that name and label pairs
// ("stage", "events", "topic", "x"), creating it on first use. It panics on
// an odd number of label strings or when name is already another kind.
func (r *Registry) Counter(name string, labels ...string) *Counter {
	return r.get(name, kindCounter, nil, labels, func() any { return new(Counter) }).(*Counter)
}

// Gauge returns the gauge with that name and label pairs, creating it on
// first use.
func (r *Registry) Gauge(name string, labels ...string) *Gauge {
	return r.get(name, kindGauge, nil, labels, func() any { return new(Gauge) }).(*Gauge)
}

// GaugeFunc registers a gauge whose value is read from fn at every scrape; fn
// must be cheap and safe for concurrent use. A later call with the same name
// and labels replaces fn.
func (r *Registry) GaugeFunc(name string, fn func() float64, labels ...string) {
	key := renderLabels(labels)
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.family(name, kindGauge, nil)
	f.series[key] = gaugeFunc(fn)
}

// Histogram returns the histogram with that name and label pairs, creating
// it on first use with buckets (upper bounds, ascending; nil means
// DefaultBuckets). The buckets of a family are fixed by its first use.
func (r *Registry) Histogram(name string, buckets []float64, labels ...string) *Histogram {
	if buckets == nil {
		buckets = DefaultBuckets
	}
	return r.get(name, kindHistogram, buckets, labels, nil).(*Histogram)
}

func (r *Registry) family(name string, kind metricKind, buckets []float64) *family {
	f, ok := r.families[name]
	if !ok || f.kind == -1 {
		if !ok {
			f = &family{name: name, series: map[string]any{}}
			r.families[name] = f
		}
		f.kind = kind
		if kind == kindHistogram {
			f.buckets = append([]float64(nil), buckets...)
			sort.Float64s(f.buckets)
		}
	}
	if f.kind != kind {
		panic(fmt.Sprintf("pipeline: metric %s is a %s, not a %s", name, f.kind, kind))
	}
	return f
}

func (r *Registry) get(name string, kind metricKind, buckets []float64, labels []string, mk func() any) any {
	key := renderLabels(labels)
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.family(name, kind, buckets)
	if m, ok := f.series[key]; ok {
		if _, isFunc := m.(gaugeFunc); !isFunc {
			return m
		}
	}
	var m any
	if kind == kindHistogram {
		m = &Histogram{upper: f.buckets, counts: make([]atomic.Uint64, len(f.buckets))}
	} else {
		m = mk()
	}
	f.series[key] = m
	return m
}

// renderLabels turns label pairs into the Prometheus form `{a="x",b="y"}`,
// which is also the series key.
func renderLabels(labels []string) string {
	if len(labels)%2 != 0 {
		panic("pipeline: metric labels must be name/value pairs")
	}
	if len(labels) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(labels); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(labels[i])
		b.WriteString(`="`)
		b.WriteString(escapeLabel(labels[i+1]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(v string) string { return labelEscaper.Replace(v) }

// withLabel adds one more label to a rendered label set (for `le`).
func withLabel(rendered, name, value string) string {
	pair := name + `="` + value + `"`
	if rendered == "" {
		return "{" + pair + "}"
	}
	return rendered[:len(rendered)-1] + "," + pair + "}"
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// WritePrometheus writes every metric in the Prometheus text exposition
// format (version 0.0.4), families and series sorted by name.
func (r *Registry) WritePrometheus(w io.Writer) error {
	r.mu.Lock()
	names := make([]string, 0, len(r.families))
	for n, f := range r.families {
		if f.kind >= 0 && len(f.series) > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	type snap struct {
		f    *family
		keys []string
		ms   []any
	}
	snaps := make([]snap, 0, len(names))
	for _, n := range names {
		f := r.families[n]
		s := snap{f: f}
		for k := range f.series {
			s.keys = append(s.keys, k)
		}
		sort.Strings(s.keys)
		for _, k := range s.keys {
			s.ms = append(s.ms, f.series[k])
		}
		snaps = append(snaps, s)
	}
	r.mu.Unlock()

	bw := bufio.NewWriter(w)
	for _, s := range snaps {
		f := s.f
		if f.help != "" {
			fmt.Fprintf(bw, "# HELP %s %s\n", f.name, strings.ReplaceAll(f.help, "\n", " "))
		}
		fmt.Fprintf(bw, "# TYPE %s %s\n", f.name, f.kind)
		for i, key := range s.keys {
			switch m := s.ms[i].(type) {
			case *Counter:
				fmt.Fprintf(bw, "%s%s %d\n", f.name, key, m.Value())
			case *Gauge:
				fmt.Fprintf(bw, "%s%s %s\n", f.name, key, formatFloat(m.Value()))
			case gaugeFunc:
				fmt.Fprintf(bw, "%s%s %s\n", f.name, key, formatFloat(m()))
			case *Histogram:
				var cum uint64
				for j, ub := range m.upper {
					cum += m.counts[j].Load()
					fmt.Fprintf(bw, "%s_bucket%s %d\n", f.name, withLabel(key, "le", formatFloat(ub)), cum)
				}
				count := m.count.Load()
				if count < cum { // observations racing the scrape
					count = cum
				}
				fmt.Fprintf(bw, "%s_bucket%s %d\n", f.name, withLabel(key, "le", "+Inf"), count)
				fmt.Fprintf(bw, "%s_sum%s %s\n", f.name, key, formatFloat(m.sum.Value()))
				fmt.Fprintf(bw, "%s_count%s %d\n", f.name, key, count)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write metrics: %w", err)
	}
	return nil
}
