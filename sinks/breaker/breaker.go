// Package breaker is the circuit breaker that sinks and stages wrap around
// every call to an external dependency (a ClickHouse table, Postgres, an
// SMTP relay, a webhook host). It imports nothing of the stage runtime, so
// a sink can use it on its own; the runner recognises ErrOpen (as
// pipeline.ErrBreakerOpen) and waits without using up retries.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker"

	"sendstream/deploy/metrics"
)

// ErrOpen is wrapped by Breaker.Do while the breaker rejects calls. It is
// retryable: the runner backs off and tries again.
var ErrOpen = errors.New("circuit breaker open")

// Config tunes a Breaker. Zero values take the defaults noted.
type Config struct {
	// ConsecutiveFailures trips the breaker (default 5).
	ConsecutiveFailures uint32
	// OpenFor is how long an open breaker rejects calls before letting
	// trial calls through (half-open) (default 10s).
	OpenFor time.Duration
	// HalfOpenCalls is how many trial calls a half-open breaker allows; that
	// many successes close it, one failure opens it again (default 1).
	HalfOpenCalls uint32
	// Metrics is where the breaker's state and counters are registered
	// (default prometheus.DefaultRegisterer).
	Metrics prometheus.Registerer
}

// Breaker is a circuit breaker around one external dependency. Sinks wrap
// every external call in Do. It is safe for concurrent use.
type Breaker struct {
	name     string
	cb       *gobreaker.CircuitBreaker
	rejected prometheus.Counter
}

// New returns a Breaker named name with the default Config.
func New(name string) *Breaker { return Config{}.New(name) }

// New returns a Breaker named name with this configuration. Its state is
// exported as the gauge sendstream_breaker_state{breaker=name} (0 closed,
// 1 half-open, 2 open), read at every scrape; a later breaker of the same
// name on the same registerer takes the gauge over and shares the counters.
func (c Config) New(name string) *Breaker {
	if c.ConsecutiveFailures == 0 {
		c.ConsecutiveFailures = 5
	}
	if c.OpenFor <= 0 {
		c.OpenFor = 10 * time.Second
	}
	if c.HalfOpenCalls == 0 {
		c.HalfOpenCalls = 1
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.DefaultRegisterer
	}
	labels := prometheus.Labels{"breaker": name}
	b := &Breaker{name: name, rejected: metrics.Register(c.Metrics, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sendstream_breaker_rejected_total", Help: "Calls rejected by an open circuit breaker.", ConstLabels: labels,
	}))}
	transitions := metrics.Register(c.Metrics, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sendstream_breaker_transitions_total", Help: "Circuit breaker state changes, by new state.", ConstLabels: labels,
	}, []string{"to"}))
	to := map[gobreaker.State]prometheus.Counter{}
	for _, s := range []gobreaker.State{gobreaker.StateClosed, gobreaker.StateHalfOpen, gobreaker.StateOpen} {
		to[s] = transitions.WithLabelValues(s.String())
	}
	trips := c.ConsecutiveFailures
	b.cb = gobreaker.NewCircuitBreaker(gobreaker.Settings{
		Name:        name,
		MaxRequests: c.HalfOpenCalls,
		Timeout:     c.OpenFor,
		ReadyToTrip: func(counts gobreaker.Counts) bool { return counts.ConsecutiveFailures >= trips },
		IsSuccessful: func(err error) bool {
			// A permanent error (a 4xx, a bad address) or the caller giving
			// up says nothing about the dependency's health.
			return err == nil || isPermanent(err) || errors.Is(err, context.Canceled)
		},
		OnStateChange: func(_ string, _, s gobreaker.State) { to[s].Inc() },
	})
	state := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sendstream_breaker_state", Help: "Circuit breaker state: 0 closed, 1 half-open, 2 open.", ConstLabels: labels,
	}, func() float64 { return float64(b.cb.State()) })
	metrics.Replace(c.Metrics, state) // takes over from an earlier breaker of this name
	return b
}

// isPermanent reports whether err, or an error it wraps, says a retry
// cannot fix it (pipeline.Permanent marks errors so).
func isPermanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// Name returns the breaker's name.
func (b *Breaker) Name() string { return b.name }

// State returns "closed", "half-open" or "open".
func (b *Breaker) State() string { return b.cb.State().String() }

// Do calls fn unless the breaker is open. It returns fn's error unchanged,
// ctx's error when ctx is already done, or an error wrapping ErrOpen
// (retryable) while the breaker rejects calls. Errors that say they are
// permanent (pipeline.Permanent) and context cancellation do not count as
// failures.
func (b *Breaker) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := b.cb.Execute(func() (any, error) { return nil, fn(ctx) })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		b.rejected.Inc()
		return fmt.Errorf("%s: %w", b.name, ErrOpen)
	}
	return err
}
