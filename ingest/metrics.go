package ingest

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sendstream/deploy/metrics"
)

// Metric names of the HTTP tier.
const (
	metricRequests   = "sendstream_http_requests_total"
	metricDuration   = "sendstream_http_request_duration_seconds"
	metricUnmatched  = "sendstream_http_unmatched_requests_total"
	metricLogDropped = "sendstream_requestlog_dropped_total"
	metricAuthCache  = "sendstream_auth_cache_total"
)

// serverMetrics holds the HTTP metrics, resolved once per route (and per
// status on its first use) so the hot path only does atomic adds.
type serverMetrics struct {
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	unmatched  prometheus.Counter
	logDropped prometheus.Counter
}

func newServerMetrics(reg prometheus.Registerer) *serverMetrics {
	return &serverMetrics{
		requests: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricRequests, Help: "HTTP requests answered, by route and status.",
		}, []string{"method", "route", "status"})),
		duration: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: metricDuration, Help: "Seconds from reading a request to writing its answer, by route.", Buckets: metrics.LatencyBuckets,
		}, []string{"method", "route"})),
		unmatched: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricUnmatched, Help: "Requests that matched no route (404) or no method (405).",
		})),
		logDropped: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricLogDropped, Help: "Request-log records of non-2xx answers dropped (queue full or publish failed).",
		})),
	}
}

// authCacheGauge registers the gauge sendstream_auth_cache_total{result}
// read from fn at every scrape, replacing one an earlier Server of the same
// registerer registered.
func authCacheGauge(reg prometheus.Registerer, result string, fn func() float64) {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricAuthCache, Help: "Credential cache lookups by result (hit or miss).",
		ConstLabels: prometheus.Labels{"result": result},
	}, fn)
	metrics.Replace(reg, g)
}

// routeMetrics are one route's series: a latency histogram and request
// counters by status, each status resolved on its first use.
type routeMetrics struct {
	requests     *prometheus.CounterVec
	method, path string
	hist         prometheus.Observer
	byStatus     [600]atomic.Pointer[prometheus.Counter]
}

func (m *serverMetrics) route(method, path string) *routeMetrics {
	return &routeMetrics{
		requests: m.requests, method: method, path: path,
		hist: m.duration.WithLabelValues(method, path),
	}
}

func (r *routeMetrics) observe(status int, d time.Duration) {
	r.hist.Observe(d.Seconds())
	if status < 100 || status >= len(r.byStatus) {
		status = 599
	}
	c := r.byStatus[status].Load()
	if c == nil {
		counter := r.requests.WithLabelValues(r.method, r.path, strconv.Itoa(status))
		c = &counter
		r.byStatus[status].Store(c)
	}
	(*c).Inc()
}
