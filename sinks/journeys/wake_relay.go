package journeys

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"sendstream/schemas"
	"sendstream/sinks/relayloop"
)

// The wake relay: an execution StartMany started waiting at its first step
// is its own timer (a journey_wakes row, migration 0084: its scope, due
// time and position). A relay round claims and deletes the due wake-ups
// of its scope and publishes those whose execution still waits there
// (StartWake: the envelopes a River timer would have published) with
// acks=all, in one transaction: a process that dies before the commit
// leaves them to the next round, so a wake-up is published at least once
// and the engine, which deduplicates by envelope id and checks the
// execution under its lock, moves each execution on once. Rounds of
// several processes on one scope skip each other's rows. The trigger
// endpoint then stores no timer job per start, and firing one costs the
// delete of a narrow row rather than an update of the execution.

//go:embed sql/wake_relay.sql
var sqlWakeRelay string

//go:embed sql/wake_due.sql
var sqlWakeDue string

// Publisher publishes envelopes with acks=all (pipeline.Publisher).
type Publisher interface {
	Publish(ctx context.Context, topic string, envs ...schemas.Envelope) error
}

// Wake relay defaults.
const (
	// DefaultWakeInterval is the most time between two rounds when the
	// last found less than a batch: a due wait fires at most about this
	// late (River's fetch poll, which it replaces, was 200 ms).
	DefaultWakeInterval = 100 * time.Millisecond
	// DefaultWakeBatch is the most executions one round publishes.
	DefaultWakeBatch = 1000
	// wakeRoundTimeout bounds one round (claim, publish, commit).
	wakeRoundTimeout = 30 * time.Second
)

// WakeRelayConfig configures StartWakeRelay. Zero values take the
// defaults.
type WakeRelayConfig struct {
	Scope    string        // the scope StartMany's FirstWait named; required
	Interval time.Duration // DefaultWakeInterval
	Batch    int           // DefaultWakeBatch
	Logger   *slog.Logger  // nil: discard
}

// StartWakeRelay runs wake relay rounds for cfg.Scope on the store's clock
// until ctx ends or the returned stop is called (stop waits for the round
// in flight).
func (s *Store) StartWakeRelay(ctx context.Context, pub Publisher, cfg WakeRelayConfig) (stop func()) {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultWakeInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultWakeBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		relayloop.Run(ctx, relayloop.Config{Name: "journey wake relay", Batch: cfg.Batch, Interval: cfg.Interval,
			Logger: cfg.Logger, Attrs: []any{"scope", cfg.Scope}},
			func(ctx context.Context) (int, error) { return s.RelayWakes(ctx, pub, cfg.Scope, cfg.Batch) })
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// RelayWakes is one relay round: it claims up to limit wake-ups of scope
// due by the store's clock, publishes those whose execution still waits
// for them and returns how many it claimed (limit: more may be due). The
// relay loop calls it; tests call it directly.
func (s *Store) RelayWakes(ctx context.Context, pub Publisher, scope string, limit int) (int, error) {
	if scope == "" {
		return 0, fmt.Errorf("relay wake-ups: no scope")
	}
	ctx, cancel := context.WithTimeout(ctx, wakeRoundTimeout)
	defer cancel()
	now := s.now().UTC()
	// Most rounds find nothing due: one probe, no transaction.
	var due bool
	if err := s.pg.QueryRow(ctx, sqlWakeDue, scope, now).Scan(&due); err != nil {
		return 0, fmt.Errorf("relay wake-ups: check due: %w", err)
	}
	if !due {
		return 0, nil
	}
	tx, err := s.pg.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("relay wake-ups: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
	rows, err := tx.Query(ctx, sqlWakeRelay, scope, now, limit)
	if err != nil {
		return 0, fmt.Errorf("relay wake-ups: claim: %w", err)
	}
	var envs []schemas.Envelope
	claimed := 0
	for rows.Next() {
		var e Execution
		var due time.Time
		var live bool
		if err := rows.Scan(&e.ID, &e.Workspace, &e.ContactID, &e.Position, &due, &live); err != nil {
			rows.Close()
			return 0, fmt.Errorf("relay wake-ups: %w", err)
		}
		claimed++
		if live {
			e.NextWakeAt = &due
			envs = append(envs, StartWake(e))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("relay wake-ups: claim: %w", err)
	}
	if claimed == 0 {
		return 0, nil
	}
	if len(envs) > 0 {
		if err := pub.Publish(ctx, schemas.TopicJourneys, envs...); err != nil {
			return 0, fmt.Errorf("relay wake-ups: publish %d: %w", len(envs), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("relay wake-ups: commit: %w", err)
	}
	return claimed, nil
}
