package webhookdelivery

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sendstream/deploy/metrics"
)

// DefaultPerTarget is the default bound of one target's Handle calls in
// one process (Config.PerTarget; a call holds its slot through its quick
// retries' waits). A target that hangs (10-second time-out) or keeps
// failing thus holds at most this many of the stage's 512 calls, so 31 of
// them at once leave room for the others; a target answering in 5 ms still
// takes about 3,000 deliveries/s per process.
const DefaultPerTarget = 16

// DefaultDeferral is the default shortest wait of a deferred delivery
// (Config.Deferral): River promotes due jobs about every 5 s anyway.
const DefaultDeferral = 5 * time.Second

// deferrals counts deliveries handed back to the schedule because their
// target's slots were all held. They are not attempts and have no
// row in the delivery log: a hanging endpoint receiving 100 events/s
// would write about 100 rows/s that say nothing about its answers.
var deferrals = metrics.Register(prometheus.DefaultRegisterer, prometheus.NewCounter(prometheus.CounterOpts{
	Name: "sendstream_webhook_deferrals_total",
	Help: "Webhook deliveries scheduled again without an attempt because their target's attempts in flight were at the per-target bound.",
}))

// limiter bounds the Handle calls per target and spaces out the
// deliveries it defers. Safe for concurrent use.
type limiter struct {
	per int

	mu sync.Mutex
	m  map[string]*targetLoad
}

// targetLoad is one target's calls in flight (the time each took its
// slot), the average time a call held its slot (moving average) and the
// time the latest deferral was scheduled at.
type targetLoad struct {
	starts []time.Time
	avg    time.Duration
	next   time.Time
}

func newLimiter(per int) *limiter { return &limiter{per: per, m: map[string]*targetLoad{}} }

// acquire takes one of key's slots at now; false when all are in flight.
// The caller passes now to release.
func (l *limiter) acquire(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.m[key]
	if t == nil {
		t = &targetLoad{}
		l.m[key] = t
	}
	if len(t.starts) >= l.per {
		return false
	}
	t.starts = append(t.starts, now)
	return true
}

// release returns the slot taken at start.
func (l *limiter) release(key string, start, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.m[key]
	if t == nil {
		return
	}
	for i, st := range t.starts {
		if st.Equal(start) {
			t.starts = append(t.starts[:i], t.starts[i+1:]...)
			break
		}
	}
	if took := now.Sub(start); took > 0 {
		if t.avg == 0 {
			t.avg = took
		} else {
			t.avg = (7*t.avg + took) / 8
		}
	}
	if len(t.starts) == 0 && !t.next.After(now) {
		delete(l.m, key)
	}
}

// deferUntil returns when a delivery key could not start now should be
// tried again: at least min from now, and each deferral of a key spaced
// after the one before by the time a slot takes to free up (hold time /
// slots), so a slow target's backlog comes back about as fast as the
// target works it off instead of all at once. The hold time is the
// average of the calls that returned, or the age of the oldest call in
// flight when that is longer: a target that starts hanging has no
// finished call to average for its first 10-30 s, and its backlog would
// otherwise come back every min, handled and deferred again each time.
func (l *limiter) deferUntil(key string, now time.Time, min time.Duration) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.m[key]
	if t == nil {
		t = &targetLoad{}
		l.m[key] = t
	}
	at := now.Add(min)
	hold := t.avg
	for _, st := range t.starts {
		hold = max(hold, now.Sub(st))
	}
	if step := hold / time.Duration(l.per); t.next.Add(step).After(at) {
		at = t.next.Add(step)
	}
	t.next = at
	deferrals.Inc()
	return at
}
