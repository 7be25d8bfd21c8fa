// Package load is the benchmark load generator: a closed loop of C
// connections for throughput, and an open loop at a fixed rate whose latencies
// are timed from each request's intended send time (no coordinated omission).
// Both sides of a comparison (frozen baseline and system under test) are
// driven by the same code, so the generator's own cost cancels in a ratio.
package load

import (
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Doer sends one request and reads its response. *fasthttp.HostClient
// implements it; tests use fakes. Do is called from many goroutines at once.
type Doer interface {
	Do(req *fasthttp.Request, resp *fasthttp.Response) error
}

var _ Doer = (*fasthttp.HostClient)(nil)

// Request describes the requests of a run. It is built once per benchmark
// and may be reused across runs; only Vary is called per request.
type Request struct {
	Method      string
	URL         string      // absolute http URL
	Header      [][2]string // extra headers, e.g. {"Authorization", "Bearer …"}
	ContentType string
	Body        []byte // the body when Vary is nil
	// OpsPerRequest is how many operations (events, rows) one request
	// carries; throughput figures are multiplied by it. 0 means 1.
	OpsPerRequest int
	// Vary, when set, appends the body of the n-th request to dst and
	// returns it. n is unique within this Request across every run that
	// uses it (the counter lives in the Request), so bodies may carry unique
	// ids. It is called concurrently and must not allocate much.
	Vary func(dst []byte, n uint64) []byte
	// VaryURL, when set, appends the absolute URL of the n-th request to
	// dst (GETs over many pages or keys); n is shared with Vary. URL still
	// names the host:port to connect to.
	VaryURL func(dst []byte, n uint64) []byte

	seq atomic.Uint64
}

// Ops returns OpsPerRequest, defaulting to 1.
func (r *Request) Ops() int {
	if r.OpsPerRequest <= 0 {
		return 1
	}
	return r.OpsPerRequest
}

// Addr returns the host:port the request's URL points at.
func (r *Request) Addr() (string, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", r.URL, err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return "", fmt.Errorf("url %q: want http://host:port/…", r.URL)
	}
	return u.Host, nil
}

// worker holds one goroutine's reusable request, response and body buffer.
type worker struct {
	req  *fasthttp.Request
	resp *fasthttp.Response
	body []byte
	url  []byte
}

// newWorker builds the fixed part of the request once.
func (r *Request) newWorker() *worker {
	w := &worker{req: fasthttp.AcquireRequest(), resp: fasthttp.AcquireResponse()}
	w.req.Header.SetMethod(r.Method)
	w.req.SetRequestURI(r.URL)
	for _, h := range r.Header {
		w.req.Header.Set(h[0], h[1])
	}
	if r.ContentType != "" {
		w.req.Header.SetContentType(r.ContentType)
	}
	if r.Vary == nil && r.Body != nil {
		w.req.SetBodyRaw(r.Body)
	}
	return w
}

// prepare sets the varying body and URL, if any.
func (r *Request) prepare(w *worker) {
	if r.Vary == nil && r.VaryURL == nil {
		return
	}
	n := r.seq.Add(1) - 1
	if r.Vary != nil {
		w.body = r.Vary(w.body[:0], n)
		w.req.SetBodyRaw(w.body)
	}
	if r.VaryURL != nil {
		w.url = r.VaryURL(w.url[:0], n)
		w.req.SetRequestURIBytes(w.url)
	}
}

func (w *worker) release() {
	fasthttp.ReleaseRequest(w.req)
	fasthttp.ReleaseResponse(w.resp)
}

// NewClient returns a fasthttp client for addr with up to conns
// connections, pipelining off, and no default User-Agent.
func NewClient(addr string, conns int) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                          addr,
		MaxConns:                      conns,
		MaxConnWaitTimeout:            30 * time.Second,
		ReadTimeout:                   30 * time.Second,
		WriteTimeout:                  30 * time.Second,
		MaxIdleConnDuration:           time.Minute,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		ReadBufferSize:                16 << 10,
		WriteBufferSize:               16 << 10,
	}
}

// Result is what one run measured inside its measurement window (after
// warm-up).
type Result struct {
	Mode     string  `json:"mode"` // "closed" or "open"
	Conns    int     `json:"conns,omitempty"`
	Rate     float64 `json:"rate,omitempty"` // intended requests per second (open loop)
	Seconds  float64 `json:"seconds"`        // length of the measurement window
	Requests uint64  `json:"requests"`       // completed (any outcome)
	OK       uint64  `json:"ok"`             // 2xx
	Non2xx   uint64  `json:"non2xx"`
	Errors   uint64  `json:"errors"` // transport errors and timeouts
	// RequestsPerSec counts 2xx answers only; OpsPerSec multiplies by
	// OpsPerRequest.
	RequestsPerSec float64 `json:"requestsPerSec"`
	OpsPerSec      float64 `json:"opsPerSec"`
	Latency        Summary `json:"latency"`
	// LatencyBuckets is the raw latency distribution: [highest ns, count]
	// of every non-empty histogram bucket.
	LatencyBuckets [][2]uint64    `json:"latencyBuckets,omitempty"`
	SendLag        *Summary       `json:"sendLag,omitempty"` // open loop: actual minus intended send time
	Statuses       map[int]uint64 `json:"statuses,omitempty"`
	FirstFailure   string         `json:"firstFailure,omitempty"`
	Hist           *Histogram     `json:"-"`
	failMu         sync.Mutex
}

// fail records a non-2xx or a transport error inside the window.
func (r *Result) fail(status int, detail string) {
	r.failMu.Lock()
	defer r.failMu.Unlock()
	if r.Statuses == nil {
		r.Statuses = map[int]uint64{}
	}
	r.Statuses[status]++
	if r.FirstFailure == "" {
		r.FirstFailure = detail
	}
}

// outcome classifies one completed request and counts it when measured.
func (r *Result) outcome(w *worker, err error, measured bool, okCount, nonCount, errCount *uint64) {
	if !measured {
		return
	}
	if err != nil {
		*errCount++
		r.fail(0, "transport: "+err.Error())
		return
	}
	sc := w.resp.StatusCode()
	if sc >= 200 && sc < 300 {
		*okCount++
		return
	}
	*nonCount++
	body := w.resp.Body()
	if len(body) > 300 {
		body = body[:300]
	}
	r.fail(sc, fmt.Sprintf("HTTP %d: %s", sc, body))
}

// finish fills the derived figures.
func (r *Result) finish(req *Request, seconds float64, ok, non, errs uint64) {
	r.Seconds = seconds
	r.OK, r.Non2xx, r.Errors = ok, non, errs
	r.Requests = ok + non + errs
	if seconds > 0 {
		r.RequestsPerSec = float64(ok) / seconds
		r.OpsPerSec = r.RequestsPerSec * float64(req.Ops())
	}
	r.Latency = r.Hist.Summary()
	r.LatencyBuckets = r.Hist.Buckets()
}

// padded keeps per-worker counters on separate cache lines.
type padded struct {
	ok, non, errs uint64
	_             [40]byte
}
