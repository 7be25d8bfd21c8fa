package pipeline

import (
	"strings"
	"sync"
	"testing"
)

func TestRegistryPrometheusText(t *testing.T) {
	r := NewRegistry()
	r.Help("http_requests_total", "Requests served.")
	c := r.Counter("http_requests_total", "route", "/v1/events", "code", "202")
	if r.Counter("http_requests_total", "route", "/v1/events", "code", "202") != c {
		t.Fatal("same name and labels must resolve to the same counter")
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				c.Inc()
			}
		}()
	}
	wg.Wait()
	r.Counter("http_requests_total", "route", `we"ird\path`, "code", "500").Add(2)
	g := r.Gauge("lag", "stage", "events")
	g.Set(5)
	g.Add(-2.5)
	h := r.Histogram("flush_seconds", []float64{0.1, 1}, "stage", "events")
	h.Observe(0.05)
	h.Observe(0.5)
	h.Observe(3)
	r.GaugeFunc("up", func() float64 { return 1 })

	got := metricsText(t, r)
	want := `# TYPE flush_seconds histogram
flush_seconds_bucket{stage="events",le="0.1"} 1
flush_seconds_bucket{stage="events",le="1"} 2
flush_seconds_bucket{stage="events",le="+Inf"} 3
flush_seconds_sum{stage="events"} 3.55
flush_seconds_count{stage="events"} 3
# HELP http_requests_total Requests served.
# TYPE http_requests_total counter
http_requests_total{route="/v1/events",code="202"} 8000
http_requests_total{route="we\"ird\\path",code="500"} 2
# TYPE lag gauge
lag{stage="events"} 2.5
# TYPE up gauge
up 1
`
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestRegistryKindMismatchPanics(t *testing.T) {
	r := NewRegistry()
	r.Counter("x")
	defer func() {
		if recover() == nil {
			t.Fatal("a gauge named like a counter must panic")
		}
	}()
	r.Gauge("x")
}

func TestRegistryOddLabelsPanics(t *testing.T) {
	defer func() {
		if v := recover(); v == nil || !strings.Contains(v.(string), "pairs") {
			t.Fatalf("odd labels: %v", v)
		}
	}()
	NewRegistry().Counter("x", "stage")
}

func BenchmarkCounterInc(b *testing.B) {
	c := NewRegistry().Counter("x", "a", "b")
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc()
		}
	})
}
