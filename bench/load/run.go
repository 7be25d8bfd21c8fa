package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Window is a run's timing: a warm-up whose requests are not counted, then
// the measured window. OnStart and OnEnd, when set, are called at the two
// boundaries (e.g. to read a process's CPU time). Conns is the closed
// loop's concurrency, for a benchmark's own Work loop to use.
type Window struct {
	Warmup   time.Duration
	Duration time.Duration
	OnStart  func()
	OnEnd    func()
	Conns    int
}

func (w Window) validate() error {
	if w.Warmup < 0 || w.Duration <= 0 {
		return fmt.Errorf("window: warm-up %v, duration %v: want warm-up ≥ 0 and duration > 0", w.Warmup, w.Duration)
	}
	return nil
}

// Closed runs a closed loop: conns goroutines each send a request, wait for
// the answer, and send the next, for warm-up plus duration. Requests that
// complete inside the window are counted. It returns early, with what it has,
// when ctx is cancelled.
func Closed(ctx context.Context, d Doer, req *Request, conns int, win Window) (*Result, error) {
	if err := win.validate(); err != nil {
		return nil, err
	}
	if conns <= 0 {
		return nil, errors.New("closed loop: conns must be > 0")
	}
	res := &Result{Mode: "closed", Conns: conns, Hist: NewHistogram()}
	var measuring, stop atomic.Bool
	counters := make([]padded, conns)
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func(c *padded) {
			defer wg.Done()
			w := req.newWorker()
			defer w.release()
			for !stop.Load() {
				req.prepare(w)
				t0 := time.Now()
				err := d.Do(w.req, w.resp)
				lat := time.Since(t0)
				m := measuring.Load()
				if m {
					res.Hist.Record(lat)
				}
				res.outcome(w, err, m, &c.ok, &c.non, &c.errs)
				if err != nil && !m {
					// Failing during warm-up (e.g. the server is gone):
					// don't spin.
					time.Sleep(time.Millisecond)
				}
			}
		}(&counters[i])
	}
	var start time.Time
	seconds := 0.0
	if SleepCtx(ctx, win.Warmup) {
		if win.OnStart != nil {
			win.OnStart()
		}
		start = time.Now()
		measuring.Store(true)
		SleepCtx(ctx, win.Duration)
		measuring.Store(false)
		seconds = time.Since(start).Seconds()
		if win.OnEnd != nil {
			win.OnEnd()
		}
	}
	stop.Store(true)
	wg.Wait()
	var ok, non, errs uint64
	for i := range counters {
		ok += counters[i].ok
		non += counters[i].non
		errs += counters[i].errs
	}
	res.finish(req, seconds, ok, non, errs)
	return res, ctx.Err()
}

// Open runs an open loop at rate requests per second for warm-up plus
// duration. Request i is due at start + i/rate; up to inFlight goroutines
// each take the next due request, wait for its time, send it, and record its
// latency from the intended time, not the actual send: when the system stalls
// and requests queue in the generator, the wait counts (no coordinated
// omission). Requests due inside the window are the ones measured. After the
// last due time it waits for what is in flight.
func Open(ctx context.Context, d Doer, req *Request, rate float64, inFlight int, win Window) (*Result, error) {
	if err := win.validate(); err != nil {
		return nil, err
	}
	if rate <= 0 || inFlight <= 0 {
		return nil, fmt.Errorf("open loop: rate %v and in-flight %d must be > 0", rate, inFlight)
	}
	res := &Result{Mode: "open", Rate: rate, Conns: inFlight, Hist: NewHistogram()}
	lag := NewHistogram()
	interval := float64(time.Second) / rate
	total := uint64(float64(win.Warmup+win.Duration) / interval)
	first := uint64(float64(win.Warmup) / interval) // first measured ticket
	var next atomic.Uint64
	counters := make([]padded, inFlight)
	start := time.Now().Add(2 * time.Millisecond)
	var wg sync.WaitGroup
	for i := 0; i < inFlight; i++ {
		wg.Add(1)
		go func(c *padded) {
			defer wg.Done()
			w := req.newWorker()
			defer w.release()
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for {
				t := next.Add(1) - 1
				if t >= total || ctx.Err() != nil {
					return
				}
				due := start.Add(time.Duration(float64(t) * interval))
				if wait := time.Until(due); wait > 0 {
					timer.Reset(wait)
					select {
					case <-timer.C:
					case <-ctx.Done():
						return
					}
				}
				req.prepare(w)
				sent := time.Now()
				err := d.Do(w.req, w.resp)
				m := t >= first
				if m {
					res.Hist.Record(time.Since(due))
					lag.Record(sent.Sub(due))
				}
				res.outcome(w, err, m, &c.ok, &c.non, &c.errs)
			}
		}(&counters[i])
	}
	if SleepCtx(ctx, time.Until(start.Add(win.Warmup))) && win.OnStart != nil {
		win.OnStart()
	}
	if SleepCtx(ctx, time.Until(start.Add(win.Warmup+win.Duration))) && win.OnEnd != nil {
		win.OnEnd()
	}
	wg.Wait()
	var ok, non, errs uint64
	for i := range counters {
		ok += counters[i].ok
		non += counters[i].non
		errs += counters[i].errs
	}
	res.finish(req, win.Duration.Seconds(), ok, non, errs)
	s := lag.Summary()
	res.SendLag = &s
	return res, ctx.Err()
}

// SleepCtx sleeps for d and reports whether it did so without ctx ending.
func SleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
