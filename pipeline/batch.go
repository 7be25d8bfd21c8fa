package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// This file holds the loop of a stage with Concurrency 0 or 1: envelopes
// handled one at a time in fetch order, in batches that end with Flush,
// the publish of their outputs and one commit.

// batch is what was handled since the last commit.
type batch struct {
	n       int
	bytes   int             // envelope bytes handled
	due     *time.Timer     // fires FlushInterval after the batch's first envelope
	last    map[int]message // last handled message per partition
	lag     map[int]int64
	outputs []Batch  // by topic, in first-use order
	scratch []output // one envelope's outputs, reused
}

func (b *batch) reset() {
	b.n, b.bytes = 0, 0
	b.due.Stop()
	clear(b.last)
	clear(b.outputs) // let the envelopes go; the slots are reused
	b.outputs = b.outputs[:0]
}

// consume runs one reader until ctx ends (returns nil after draining) or a
// failure that needs the reader reopened (returns the error, with nothing
// after the last successful batch committed).
func (s *stageRunner) consume(ctx context.Context) error {
	cl, workCtx, ch, closeReader, err := s.openReader(ctx)
	if err != nil {
		return err
	}
	defer closeReader()

	// The batch's deadline is one timer armed by its first envelope, not a
	// clock read and a reset per envelope.
	b := &batch{last: map[int]message{}, lag: map[int]int64{},
		due: time.NewTimer(time.Hour)}
	b.due.Stop()
	defer b.due.Stop()

	for {
		if ctx.Err() != nil {
			return s.complete(workCtx, cl, b)
		}
		var f fetched
		got := true
		switch {
		case b.n == 0:
			select {
			case f = <-ch:
			case <-ctx.Done():
				return s.complete(workCtx, cl, b)
			}
		case s.flusher == nil:
			// The batch ends when nothing is waiting, or when a steady
			// stream has run for FlushInterval.
			select {
			case f = <-ch:
			case <-b.due.C:
				got = false
			default:
				got = false
			}
		default:
			select {
			case f = <-ch:
			case <-b.due.C: // FlushInterval is up
				got = false
			case <-ctx.Done():
				return s.complete(workCtx, cl, b)
			}
		}
		if !got {
			if err := s.complete(workCtx, cl, b); err != nil {
				return err
			}
			continue
		}
		if f.err != nil {
			if ctx.Err() != nil {
				return s.complete(workCtx, cl, b)
			}
			return errors.Join(fmt.Errorf("fetch %s: %w", s.topic, f.err), s.complete(workCtx, cl, b))
		}

		if err := s.handle(ctx, workCtx, b, &f); err != nil {
			// The envelope is unfinished: finish the batch before it, then
			// stop (drain) or reopen so it is read again.
			cerr := s.complete(workCtx, cl, b)
			if errors.Is(err, errAbandoned) {
				return cerr
			}
			return errors.Join(err, cerr)
		}
		b.lag[f.m.Partition] = max(f.m.HighWaterMark-f.m.Offset-1, 0)
		if b.n >= s.cfg.BatchSize || b.bytes >= s.cfg.BatchBytes {
			if err := s.complete(workCtx, cl, b); err != nil {
				return err
			}
		}
	}
}

// handle processes one message into b: decode, Handle with retries, route
// outputs, or dead-letter. It returns an error only when the message is not
// finished (abandoned for drain, or the dead-letter publish failed).
func (s *stageRunner) handle(ctx, workCtx context.Context, b *batch, f *fetched) error {
	outs, err := s.process(ctx, workCtx, f, b.scratch[:0])
	b.scratch = outs[:0]
	if err != nil {
		return err
	}
	for _, o := range outs {
		b.outputs = AddToBatch(b.outputs, o.topic, o.env)
	}
	s.done(b, f.m)
	return nil
}

// done records m as finished in b.
func (s *stageRunner) done(b *batch, m message) {
	if b.n == 0 {
		b.due.Reset(s.cfg.FlushInterval)
	}
	b.n++
	b.bytes += len(m.Value)
	b.last[m.Partition] = m
}

// complete ends the batch: Flush (retried), publish the outputs, commit the
// last handled offset of each partition. When Flush or a publish fails, it
// returns the error with nothing committed; the caller reopens the reader.
func (s *stageRunner) complete(ctx context.Context, cl *kgo.Client, b *batch) error {
	if b.n == 0 {
		return nil
	}
	if s.flusher != nil {
		if err := s.flush(ctx); err != nil {
			b.reset()
			return fmt.Errorf("flush: %w", err)
		}
	}
	if len(b.outputs) > 0 {
		if err := s.publish(ctx, b.outputs...); err != nil {
			b.reset()
			return fmt.Errorf("publish outputs: %w", err)
		}
	}
	offsets := make(map[int32]kgo.EpochOffset, len(b.last))
	for p, m := range b.last {
		offsets[int32(p)] = kgo.EpochOffset{Epoch: m.LeaderEpoch, Offset: m.Offset + 1}
	}
	var lag int64
	for _, l := range b.lag {
		lag += l
	}
	s.lag.Set(float64(lag))
	b.reset()
	if err := commit(ctx, cl, s.topic, offsets); err != nil {
		// Everything is durable; only the position is lost, so these
		// envelopes will be handled again after a rebalance or restart.
		s.commitFailures.Inc()
		s.log.Warn("commit failed", "err", err)
		return nil
	}
	s.commits.Inc()
	return nil
}

// flush calls Flush, retrying failures with backoff up to MaxRetries.
func (s *stageRunner) flush(ctx context.Context) error {
	for retries := 0; ; retries++ {
		start := time.Now()
		err := s.flusher.Flush(ctx)
		s.flushSeconds.ObserveSince(start)
		s.flushes.Inc()
		if err == nil {
			return nil
		}
		s.flushFailures.Inc()
		if IsPermanent(err) || retries >= s.cfg.MaxRetries || ctx.Err() != nil {
			return err
		}
		wait := backoff(retries, s.cfg.BackoffBase, s.cfg.BackoffMax)
		s.log.Warn("flush failed; retrying", "err", err, "retryIn", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
	}
}
