// Package relayloop runs the rounds of a relay that moves rows from
// Postgres to Kafka (the contacts outbox relay, the journeys wake relay):
// back to back while a round finds a full batch, else one every interval,
// and after failed rounds a wait that doubles up to a cap, so a broker or
// database that is down costs one logged error per wait, not ten a second.
package relayloop

import (
	"context"
	"log/slog"
	"time"
)

// DefaultMaxBackoff caps the wait after failed rounds.
const DefaultMaxBackoff = 10 * time.Second

// Config says how Run paces rounds.
type Config struct {
	Name     string        // in log lines, e.g. "contacts outbox relay"
	Batch    int           // a round that handled this many goes again at once
	Interval time.Duration // the wait after a round that found less
	// MaxBackoff caps the wait after consecutive failed rounds (interval,
	// then twice that, …); DefaultMaxBackoff when zero, never below
	// Interval.
	MaxBackoff time.Duration
	Logger     *slog.Logger // nil: slog.Default()
	Attrs      []any        // added to every log line (e.g. "scope", s)
}

// Run calls round until ctx ends. round returns how many items it handled;
// an error is logged (unless ctx ended) and the next round waits longer.
func Run(ctx context.Context, cfg Config, round func(context.Context) (int, error)) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	failures := 0
	for ctx.Err() == nil {
		n, err := round(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			failures++
			logger.Error(cfg.Name, append([]any{"err", err, "failures", failures}, cfg.Attrs...)...)
		case err == nil:
			failures = 0
			if n >= cfg.Batch && cfg.Batch > 0 {
				continue // more may be waiting
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(Wait(cfg, failures)):
		}
	}
}

// Wait is how long Run waits after a round, given how many rounds in a
// row have failed: the interval, doubled per failure up to the cap.
func Wait(cfg Config, failures int) time.Duration {
	limit := cfg.MaxBackoff
	if limit <= 0 {
		limit = DefaultMaxBackoff
	}
	limit = max(limit, cfg.Interval)
	n := min(max(failures, 0), 62)
	if cfg.Interval > limit>>n { // Interval·2^n past the cap, compared without a shift that could overflow
		return limit
	}
	return cfg.Interval << n
}
