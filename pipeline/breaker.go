package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker"
)

// ErrBreakerOpen is wrapped by Breaker.Do while the breaker rejects calls. It
// is retryable: the runner backs off and tries again.
var ErrBreakerOpen = errors.New("circuit breaker open")

// BreakerConfig tunes a Breaker. Zero values take the defaults noted.
type BreakerConfig struct {
	// ConsecutiveFailures trips the breaker (default 5).
	ConsecutiveFailures uint32
	// OpenFor is how long an open breaker rejects calls before letting
	// trial calls through (half-open) (default 10s).
	OpenFor time.Duration
	// HalfOpenCalls is how many trial calls a half-open breaker allows; that
	// many successes close it, one failure opens it again (default 1).
	HalfOpenCalls uint32
	// Metrics receives the breaker's state and counters (default
	// DefaultMetrics).
	Metrics *Registry
}

// Breaker is a circuit breaker around one external dependency (a ClickHouse
// table, an SMTP relay, a webhook host). Sinks wrap every external call in
// Do. It is safe for concurrent use.
type Breaker struct {
	name     string
	cb       *gobreaker.CircuitBreaker
	rejected *Counter
}

// NewBreaker returns a Breaker with the default BreakerConfig.
func NewBreaker(name string) *Breaker { return BreakerConfig{}.New(name) }

// New returns a Breaker named name with this configuration. Its state is
// exported as the gauge sendstream_breaker_state{breaker=name} (0 closed,
// 1 half-open, 2 open).
func (c BreakerConfig) New(name string) *Breaker {
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
		c.Metrics = DefaultMetrics
	}
	m := c.Metrics
	m.Help("sendstream_breaker_state", "Circuit breaker state: 0 closed, 1 half-open, 2 open.")
	m.Help("sendstream_breaker_rejected_total", "Calls rejected by an open circuit breaker.")
	m.Help("sendstream_breaker_transitions_total", "Circuit breaker state changes, by new state.")
	b := &Breaker{name: name, rejected: m.Counter("sendstream_breaker_rejected_total", "breaker", name)}
	trips := c.ConsecutiveFailures
	b.cb = gobreaker.NewCircuitBreaker(gobreaker.Settings{
		Name:        name,
		MaxRequests: c.HalfOpenCalls,
		Timeout:     c.OpenFor,
		ReadyToTrip: func(counts gobreaker.Counts) bool { return counts.ConsecutiveFailures >= trips },
		IsSuccessful: func(err error) bool {
			// A permanent error (a 4xx, a bad address) or the caller giving
			// up says nothing about the dependency's health.
			return err == nil || IsPermanent(err) || errors.Is(err, context.Canceled)
		},
		OnStateChange: func(_ string, _, to gobreaker.State) {
			m.Counter("sendstream_breaker_transitions_total", "breaker", name, "to", to.String()).Inc()
		},
	})
	m.GaugeFunc("sendstream_breaker_state", func() float64 { return float64(b.cb.State()) }, "breaker", name)
	return b
}

// Name returns the breaker's name.
func (b *Breaker) Name() string { return b.name }

// State returns "closed", "half-open" or "open".
func (b *Breaker) State() string { return b.cb.State().String() }

// Do calls fn unless the breaker is open. It returns fn's error unchanged,
// ctx's error when ctx is already done, or an error wrapping ErrBreakerOpen
// (retryable) while the breaker rejects calls. Errors marked Permanent and
// context cancellation do not count as failures.
func (b *Breaker) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := b.cb.Execute(func() (any, error) { return nil, fn(ctx) })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		b.rejected.Inc()
		return fmt.Errorf("%s: %w", b.name, ErrBreakerOpen)
	}
	return err
}
