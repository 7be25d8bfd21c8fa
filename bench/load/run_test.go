package load

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// fakeDoer answers every request after an optional delay, with a status
// chosen by the request's body.
type fakeDoer struct {
	delay  func(n int64) time.Duration
	calls  atomic.Int64
	mu     sync.Mutex
	bodies map[string]bool
}

func (f *fakeDoer) Do(req *fasthttp.Request, resp *fasthttp.Response) error {
	n := f.calls.Add(1)
	if f.delay != nil {
		time.Sleep(f.delay(n))
	}
	if f.bodies != nil {
		f.mu.Lock()
		f.bodies[string(req.Body())] = true
		f.mu.Unlock()
	}
	switch string(req.Body()) {
	case "fail":
		resp.SetStatusCode(500)
		resp.SetBodyString(`{"error":"boom"}`)
	case "err":
		return errors.New("connection refused")
	default:
		resp.SetStatusCode(201)
	}
	return nil
}

func TestClosedCountsOutcomesInsideTheWindow(t *testing.T) {
	for _, tc := range []struct {
		body                string
		wantOK, wantFailure bool
	}{
		{"ok", true, false},
		{"fail", false, true},
		{"err", false, true},
	} {
		f := &fakeDoer{delay: func(int64) time.Duration { return time.Millisecond }}
		var started, ended bool
		res, err := Closed(context.Background(), f, &Request{Method: "POST", URL: "http://x/", Body: []byte(tc.body)}, 4,
			Window{Warmup: 50 * time.Millisecond, Duration: 200 * time.Millisecond, OnStart: func() { started = true }, OnEnd: func() { ended = true }})
		if err != nil {
			t.Fatal(err)
		}
		if !started || !ended {
			t.Fatal("window hooks not called")
		}
		// 4 workers × ~1 ms per request × 200 ms ≈ 800; the warm-up's ~200
		// must not be counted.
		if res.Requests < 200 || res.Requests > 850 || res.Requests >= uint64(f.calls.Load()) {
			t.Fatalf("%s: %d measured of %d calls", tc.body, res.Requests, f.calls.Load())
		}
		if (res.OK == res.Requests) != tc.wantOK || (res.FirstFailure != "") != tc.wantFailure {
			t.Fatalf("%s: ok %d of %d, failure %q", tc.body, res.OK, res.Requests, res.FirstFailure)
		}
		if tc.body == "fail" && (res.Statuses[500] != res.Non2xx || !strings.Contains(res.FirstFailure, "boom")) {
			t.Fatalf("statuses %v, first failure %q", res.Statuses, res.FirstFailure)
		}
		if res.Latency.Count != res.Requests || res.Latency.P50Ms < 0.9 {
			t.Fatalf("latency %+v", res.Latency)
		}
	}
}

func TestVaryGivesEveryRequestItsOwnBody(t *testing.T) {
	f := &fakeDoer{bodies: map[string]bool{}}
	req := &Request{Method: "POST", URL: "http://x/", Vary: func(dst []byte, n uint64) []byte {
		return fasthttpAppendUint(append(dst, "id-"...), n)
	}}
	for run := 0; run < 2; run++ {
		if _, err := Closed(context.Background(), f, req, 8, Window{Duration: 50 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	if int64(len(f.bodies)) != f.calls.Load() {
		t.Fatalf("%d distinct bodies for %d requests across two runs", len(f.bodies), f.calls.Load())
	}
}

func TestVaryURLSendsEachRequestToItsOwnURL(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	d := doerFunc(func(req *fasthttp.Request, resp *fasthttp.Response) error {
		mu.Lock()
		seen[string(req.URI().FullURI())] = true
		mu.Unlock()
		resp.SetStatusCode(200)
		return nil
	})
	req := &Request{Method: "GET", URL: "http://127.0.0.1:9/items", VaryURL: func(dst []byte, n uint64) []byte {
		return fasthttpAppendUint(append(dst, "http://127.0.0.1:9/items?page="...), n%7)
	}}
	res, err := Closed(context.Background(), d, req, 4, Window{Duration: 30 * time.Millisecond})
	if err != nil || res.OK < 7 {
		t.Fatalf("%v, %d ok", err, res.OK)
	}
	if len(seen) != 7 || !seen["http://127.0.0.1:9/items?page=6"] {
		t.Fatalf("urls %v", seen)
	}
}

type doerFunc func(req *fasthttp.Request, resp *fasthttp.Response) error

func (f doerFunc) Do(req *fasthttp.Request, resp *fasthttp.Response) error { return f(req, resp) }

func fasthttpAppendUint(dst []byte, n uint64) []byte { return fasthttp.AppendUint(dst, int(n)) }

func TestOpenSendsAtTheRateAndTimesFromIntendedSend(t *testing.T) {
	// 1000/s for 500 ms, one request in flight; request 101 stalls 100 ms.
	// A closed-loop timer would record one slow request; timing from the
	// intended send time records the ~100 requests that queued behind it.
	f := &fakeDoer{delay: func(n int64) time.Duration {
		if n == 101 {
			return 100 * time.Millisecond
		}
		return 0
	}}
	res, err := Open(context.Background(), f, &Request{Method: "GET", URL: "http://x/"}, 1000, 1,
		Window{Warmup: 50 * time.Millisecond, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 500 || res.OK != 500 || f.calls.Load() != 550 {
		t.Fatalf("measured %d (ok %d), sent %d; want 500 of 550", res.Requests, res.OK, f.calls.Load())
	}
	over50 := 0
	for _, q := range []float64{0.8, 0.85, 0.9} {
		if res.Hist.Quantile(q) > 50*time.Millisecond {
			over50++
		}
	}
	if over50 == 0 || res.Latency.MaxMs < 95 {
		t.Fatalf("stall hidden: %+v", res.Latency)
	}
	if res.SendLag == nil || res.SendLag.MaxMs < 90 {
		t.Fatalf("send lag should show the queueing: %+v", res.SendLag)
	}
	if res.RequestsPerSec < 990 || res.RequestsPerSec > 1010 {
		t.Fatalf("rate %v", res.RequestsPerSec)
	}
}

func TestOpenWithoutStallsHasLowLatency(t *testing.T) {
	f := &fakeDoer{}
	res, err := Open(context.Background(), f, &Request{Method: "GET", URL: "http://x/"}, 2000, 16,
		Window{Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 600 {
		t.Fatalf("measured %d, want 600", res.Requests)
	}
	if res.Latency.P50Ms > 5 {
		t.Fatalf("median %v ms for an instant server", res.Latency.P50Ms)
	}
}

func TestRunsStopWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := Open(ctx, &fakeDoer{}, &Request{Method: "GET", URL: "http://x/"}, 100, 4, Window{Duration: time.Hour})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 2*time.Second {
		t.Fatalf("open: err %v after %v", err, time.Since(t0))
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	_, err = Closed(ctx2, &fakeDoer{}, &Request{Method: "GET", URL: "http://x/"}, 4, Window{Duration: time.Hour})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("closed: err %v", err)
	}
}

func TestAddr(t *testing.T) {
	r := &Request{URL: "http://127.0.0.1:9/api/v1/me?x=1"}
	if a, err := r.Addr(); err != nil || a != "127.0.0.1:9" {
		t.Fatalf("%q %v", a, err)
	}
	if _, err := (&Request{URL: "https://x/"}).Addr(); err == nil {
		t.Fatal("https must be refused")
	}
}
