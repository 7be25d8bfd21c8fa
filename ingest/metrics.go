package ingest

import (
	"strconv"
	"sync/atomic"
	"time"

	"sendstream/pipeline"
)

// Metric names of the HTTP tier.
const (
	metricRequests   = "sendstream_http_requests_total"
	metricDuration   = "sendstream_http_request_duration_seconds"
	metricUnmatched  = "sendstream_http_unmatched_requests_total"
	metricLogDropped = "sendstream_requestlog_dropped_total"
	metricAuthCache  = "sendstream_auth_cache_total"
)

// serverMetrics holds the HTTP metrics, resolved once per route so the hot
// path only does atomic adds.
type serverMetrics struct {
	reg        *pipeline.Registry
	unmatched  *pipeline.Counter
	logDropped *pipeline.Counter
}

func newServerMetrics(reg *pipeline.Registry) *serverMetrics {
	reg.Help(metricRequests, "HTTP requests answered, by route and status.")
	reg.Help(metricDuration, "Seconds from reading a request to writing its answer, by route.")
	reg.Help(metricUnmatched, "Requests that matched no route (404) or no method (405).")
	reg.Help(metricLogDropped, "Request-log records of non-2xx answers dropped (queue full or publish failed).")
	reg.Help(metricAuthCache, "Credential cache lookups by result (hit or miss).")
	return &serverMetrics{
		reg:        reg,
		unmatched:  reg.Counter(metricUnmatched),
		logDropped: reg.Counter(metricLogDropped),
	}
}

// routeMetrics are one route's series: a latency histogram and request
// counters by status, each resolved on first use.
type routeMetrics struct {
	reg          *pipeline.Registry
	method, path string
	hist         *pipeline.Histogram
	byStatus     [600]atomic.Pointer[pipeline.Counter]
}

func (m *serverMetrics) route(method, path string) *routeMetrics {
	return &routeMetrics{
		reg: m.reg, method: method, path: path,
		hist: m.reg.Histogram(metricDuration, nil, "method", method, "route", path),
	}
}

func (r *routeMetrics) observe(status int, d time.Duration) {
	r.hist.Observe(d.Seconds())
	if status < 100 || status >= len(r.byStatus) {
		status = 599
	}
	c := r.byStatus[status].Load()
	if c == nil {
		c = r.reg.Counter(metricRequests, "method", r.method, "route", r.path, "status", strconv.Itoa(status))
		r.byStatus[status].Store(c)
	}
	c.Inc()
}
