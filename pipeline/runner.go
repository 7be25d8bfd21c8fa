package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// This file holds Run and the per-stage runner: building the stages, one
// reader loop per stage (batch.go, or keyed.go for Concurrency > 1) and
// reopening it after failures.

// Run builds the configured stages and runs one consumer-group reader per
// stage until ctx is cancelled, then drains: each stage stops fetching,
// finishes the envelope in hand, flushes, publishes and commits within
// DrainTimeout, and is closed. It returns an error when a stage cannot be
// built (the stages already built are closed) and otherwise the errors of
// the final drain and Close, if any. Topics must exist (see EnsureTopics).
//
// Per envelope: decode (undecodable records are dead-lettered), Handle with
// retries (exponential backoff, env.Attempt incremented; errors wrapping
// ErrBreakerOpen wait without using up retries), then dead-letter when
// Permanent or retries are exhausted. Per batch: Flush (retried), publish
// the outputs, commit the offsets of the handled envelopes. When Flush or a
// publish still fails, nothing is committed and the reader is reopened, so
// the batch is read again: at least once, never past an unfinished envelope.
// With Concurrency 0 or 1, envelopes are handled one at a time per stage,
// so a retry holds the stage (and keeps per-partition order); under
// sustained load outputs wait at most FlushInterval for their batch to end.
// With Concurrency N > 1 (keyed.go), up to N envelopes of different keys are
// handled at once and in order per key; each one's outputs are published
// as soon as it is handled, and each partition is committed only up to its
// first envelope still in flight (acks.go), so a retry or a slow envelope
// holds its key, and the commit position of its partition, but not the
// other keys; at most MaxInFlight envelopes are fetched and unfinished.
// On drain the keyed loop starts nothing more, waits for the running
// envelopes within DrainTimeout, and commits what finished.
func Run(ctx context.Context, cfg RunConfig) error {
	cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	runners := make([]*stageRunner, 0, len(cfg.Stages))
	closeAll := func() error {
		var errs []error
		for _, sr := range runners {
			if c, ok := sr.stage.(Closer); ok {
				if err := c.Close(); err != nil {
					errs = append(errs, fmt.Errorf("close stage %s: %w", sr.reg.Name, err))
				}
			}
		}
		return errors.Join(errs...)
	}
	for _, reg := range cfg.Stages {
		st, err := reg.Build(ctx, cfg.Resources)
		if err == nil && st == nil {
			err = errors.New("constructor returned no stage")
		}
		if err != nil {
			return errors.Join(fmt.Errorf("build stage %s: %w", reg.Name, err), closeAll())
		}
		runners = append(runners, newStageRunner(&cfg, reg, st))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(runners))
	for i, sr := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Labelled, with every goroutine it starts (its Kafka client's
			// included), so that a CPU profile splits by stage.
			pprof.Do(ctx, pprof.Labels("stage", sr.reg.Name), func(ctx context.Context) {
				errs[i] = sr.run(ctx)
			})
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, closeAll())...)
}

// stageRunner consumes one stage's topic.
type stageRunner struct {
	cfg     *RunConfig
	reg     Registered
	stage   Stage
	flusher Flusher // nil when the stage does not buffer
	topic   string  // full consumed topic
	log     *slog.Logger

	// The stage's series, resolved once in newStageRunner.
	processed, failed, retried, deadLettered prometheus.Counter
	flushes, flushFailures, commits          prometheus.Counter
	commitFailures, reopens                  prometheus.Counter
	lag                                      prometheus.Gauge
	flushSeconds, handleSeconds              durations
	calls                                    atomic.Uint64 // Handle calls, for sampling
}

// handleSample: one Handle call in this many is timed. Two clock reads
// and a histogram update per envelope cost more than many stages' Handle;
// the distribution survives sampling, and processed_total counts every
// call.
const handleSample = 8

// newStageRunner resolves the stage's metric series once.
func newStageRunner(cfg *RunConfig, reg Registered, st Stage) *stageRunner {
	m := newRunnerMetrics(cfg.Metrics)
	sr := &stageRunner{
		cfg:            cfg,
		reg:            reg,
		stage:          st,
		topic:          cfg.TopicPrefix + reg.Consumes,
		log:            cfg.Logger.With("stage", reg.Name),
		processed:      m.processed.WithLabelValues(reg.Name),
		failed:         m.failed.WithLabelValues(reg.Name),
		retried:        m.retried.WithLabelValues(reg.Name),
		deadLettered:   m.deadLettered.WithLabelValues(reg.Name),
		flushes:        m.flushes.WithLabelValues(reg.Name),
		flushFailures:  m.flushFailures.WithLabelValues(reg.Name),
		commits:        m.commits.WithLabelValues(reg.Name),
		commitFailures: m.commitFailures.WithLabelValues(reg.Name),
		reopens:        m.reopens.WithLabelValues(reg.Name),
		lag:            m.lag.WithLabelValues(reg.Name),
		flushSeconds:   durations{m.flushSeconds.WithLabelValues(reg.Name)},
		handleSeconds:  durations{m.handleSeconds.WithLabelValues(reg.Name)},
	}
	if f, ok := st.(Flusher); ok {
		sr.flusher = f
	}
	return sr
}

// run consumes until ctx is cancelled, reopening the reader with backoff
// after failures (reopenAfter).
func (s *stageRunner) run(ctx context.Context) error {
	failures := 0
	consume := s.consume
	if s.reg.Concurrency > 1 {
		consume = s.consumeKeyed
	}
	for {
		opened := time.Now()
		err := consume(ctx)
		if ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("stage %s: drain: %w", s.reg.Name, err)
			}
			return nil
		}
		if err == nil { // not expected: consume returns nil only on ctx end
			failures = 0
			continue
		}
		var wait time.Duration
		failures, wait = reopenAfter(failures, time.Since(opened), s.cfg.BackoffBase, s.cfg.BackoffMax)
		s.reopens.Inc()
		s.log.Error("stage failed; reopening reader", "err", err, "retryIn", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
	}
}

// reopenAfter counts a reader's failure after it ran for ran and returns
// the new count of failures in a row and the wait before reopening:
// base·2^(count-1), capped at max. A reader that ran for max or longer had
// recovered, so its failure starts again from base: otherwise every
// disruption (a rebalance, a session that expired while the process was
// paused) added to the count for good, and after a few the stage sat out
// max each time.
func reopenAfter(failures int, ran, base, max time.Duration) (int, time.Duration) {
	if ran >= max {
		failures = 0
	}
	failures++
	return failures, backoff(failures-1, base, max)
}

// backoff returns base·2^attempt capped at max.
func backoff(attempt int, base, max time.Duration) time.Duration {
	if attempt > 30 || base <= 0 || base > max>>attempt { // base·2^attempt past max, compared without a shift that could overflow
		return max
	}
	return base << attempt
}
