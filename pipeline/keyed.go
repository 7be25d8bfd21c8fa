package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// This file holds the loop of a stage with Concurrency > 1: Handle runs for
// up to Concurrency envelopes at once, in order for one key, each envelope's
// outputs are published as soon as it is handled, and each partition is
// committed up to its first envelope still in flight (partAcks).

// keyedItem is one fetched record in the keyed loop.
type keyedItem struct {
	f    fetched
	key  string
	part *partAcks
	seq  int64 // in part
}

// keyQueue holds the records of one key not yet handled, in fetch order;
// busy while its head is being handled.
type keyQueue struct {
	items []*keyedItem
	busy  bool
}

// keyedResult is a worker's answer: err is nil when the envelope is
// finished (handled and its outputs published, or dead-lettered).
type keyedResult struct {
	it  *keyedItem
	err error
}

// itemKey returns the ordering key of a record: the envelope's Key, its ID
// when Key is empty, the record key when the value is not an envelope or
// was not decoded (a type the stage does not handle).
func itemKey(f *fetched) string {
	switch {
	case f.decodeErr != nil || f.skip:
		return string(f.m.Key)
	case f.env.Key != "":
		return f.env.Key
	default:
		return f.env.ID
	}
}

// keyedState is the keyed loop's bookkeeping; only consumeKeyed's
// goroutine touches it.
type keyedState struct {
	parts     map[int32]*partAcks
	committed map[int32]int64 // last committed next-offset per partition
	lag       map[int32]int64
	keys      map[string]*keyQueue
	ready     []string // keys whose head may start, in the order they became ready
	running   int      // workers handling an envelope
	inFlight  int      // records fetched and not finished (queued or running)
	tracked   int      // records in parts not behind their commit position
	handled   int      // envelopes finished since the last commit
	bytes     int      // their record bytes
	moved     bool     // a commit position moved since the last commit
	flushErr  bool     // the last Flush failed: nothing more is committed
}

// consumeKeyed is consume for a stage with Concurrency > 1. It runs one
// reader until ctx ends (returns nil after draining) or a failure that
// needs the reader reopened (returns the error after committing what
// finished). In both cases the loop first stops starting envelopes and
// waits for the running ones; envelopes not finished stay uncommitted and
// are read again.
func (s *stageRunner) consumeKeyed(ctx context.Context) error {
	cl, workCtx, ch, closeReader, err := s.openReader(ctx)
	if err != nil {
		return err
	}
	defer closeReader()

	limit := s.reg.Concurrency
	maxInFlight := s.reg.MaxInFlight
	if maxInFlight <= 0 {
		maxInFlight = DefaultInFlightPerWorker * limit
	}
	results := make(chan keyedResult, limit) // a worker never blocks on its answer
	st := &keyedState{
		parts: map[int32]*partAcks{}, committed: map[int32]int64{}, lag: map[int32]int64{},
		keys: map[string]*keyQueue{},
	}
	// due fires FlushInterval after the first envelope finished since the
	// last commit: a Flusher's batch deadline, and for other stages the
	// commit of a busy stage (an idle one commits at once).
	due := time.NewTimer(time.Hour)
	due.Stop()
	defer due.Stop()

	// limit long-lived workers handle the envelopes, not a goroutine per
	// envelope: a fresh goroutine would grow its stack anew through every
	// Handle that goes deep (a template render in the delivery stage).
	work := make(chan *keyedItem, limit)
	for range limit {
		go func() {
			for it := range work {
				outs, err := s.process(ctx, workCtx, &it.f, nil)
				if err == nil {
					err = s.publishOutputs(workCtx, outs)
				}
				results <- keyedResult{it, err}
			}
		}()
	}
	defer close(work) // the loop returns once no envelope is running

	dispatch := func() {
		for st.running < limit && len(st.ready) > 0 {
			key := st.ready[0]
			st.ready = st.ready[1:]
			q := st.keys[key]
			it := q.items[0]
			q.items = q.items[1:]
			q.busy = true
			st.running++
			work <- it // never blocks: at most limit are running
		}
	}

	var failure error
	stopping := false // drain or failure: start nothing more
	for {
		if stopping && st.running == 0 {
			break
		}
		in, done := ch, ctx.Done()
		if stopping || st.inFlight >= maxInFlight || st.tracked >= s.cfg.MaxTracked {
			in = nil // back-pressure: the fetcher blocks, kgo stops fetching
		}
		if stopping {
			done = nil
		}
		select {
		case <-done: // the fetcher's context ends with ctx
			stopping = true
		case f := <-in:
			if f.err != nil {
				failure = fmt.Errorf("fetch %s: %w", s.topic, f.err)
				stopping = true
				continue
			}
			if f.skip {
				// A type the stage does not handle has no effect: it is
				// finished as it arrives, without a worker or its key's
				// queue, and committed with the next batch (due).
				if s.passOver(st, f) {
					due.Reset(s.cfg.FlushInterval)
				}
				continue
			}
			s.enqueue(st, f)
			dispatch()
		case r := <-results:
			st.running--
			q := st.keys[r.it.key]
			q.busy = false
			st.inFlight--
			if r.err != nil {
				// Unfinished: what follows it on its key must wait for
				// its redelivery, so stop and reopen (or drain).
				if !errors.Is(r.err, errAbandoned) && failure == nil {
					failure = r.err
				}
				stopping = true
				continue
			}
			before := r.it.part.pending()
			if r.it.part.ack(r.it.seq) {
				st.moved = true
			}
			st.tracked -= before - r.it.part.pending()
			if st.handled == 0 {
				due.Reset(s.cfg.FlushInterval)
			}
			st.handled++
			st.bytes += len(r.it.f.m.Value)
			if len(q.items) > 0 {
				st.ready = append(st.ready, r.it.key)
			} else {
				delete(st.keys, r.it.key)
			}
			if !stopping {
				dispatch()
			}
			// Outputs are published already: a commit only saves work
			// after a crash, so it waits for an idle moment or for due.
			if s.flusher == nil && st.running == 0 && len(results) == 0 && st.moved {
				if err := s.commitKeyed(workCtx, cl, st); err != nil {
					failure, stopping = err, true
				}
			} else if s.flusher != nil && (st.handled >= s.cfg.BatchSize || st.bytes >= s.cfg.BatchBytes) {
				if err := s.commitKeyed(workCtx, cl, st); err != nil {
					failure, stopping = err, true
				}
			}
		case <-due.C:
			if err := s.commitKeyed(workCtx, cl, st); err != nil {
				failure, stopping = err, true
			}
		}
	}
	// Everything running has returned: commit what finished, within the
	// drain bound when draining (a short grace when it is used up).
	if st.flushErr {
		return failure // as in the batch loop: nothing committed after a failed Flush
	}
	finalCtx := workCtx
	if workCtx.Err() != nil {
		var cancel context.CancelFunc
		finalCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	return errors.Join(failure, s.commitKeyed(finalCtx, cl, st))
}

// track returns the tracker of f's partition, a fresh one for its first
// record or when the partition is read again from an earlier offset (after
// a rebalance): acks of the old records no longer move its commit position,
// and records of the old tracker still in flight leave st.tracked as they
// finish.
func (st *keyedState) track(f *fetched) *partAcks {
	p := int32(f.m.Partition)
	acks := st.parts[p]
	if acks == nil || f.m.Offset <= acks.last() {
		acks = newPartAcks()
		st.parts[p] = acks
	}
	st.lag[p] = max(f.m.HighWaterMark-f.m.Offset-1, 0)
	return acks
}

// passOver tracks f, a record the stage does not handle, as finished at
// once and counts it among the envelopes finished since the last commit.
// It reports whether it is the first of them (the caller starts the
// commit timer then).
func (s *stageRunner) passOver(st *keyedState, f fetched) bool {
	acks := st.track(&f)
	before := acks.pending()
	if acks.ack(acks.add(f.m.Offset, f.m.LeaderEpoch)) {
		st.moved = true
	}
	st.tracked += acks.pending() - before
	first := st.handled == 0
	st.handled++
	return first
}

// enqueue tracks f in its partition and queues it behind its key.
func (s *stageRunner) enqueue(st *keyedState, f fetched) {
	acks := st.track(&f)
	it := &keyedItem{f: f, key: itemKey(&f), part: acks}
	it.seq = acks.add(f.m.Offset, f.m.LeaderEpoch)
	st.tracked++
	st.inFlight++
	q := st.keys[it.key]
	if q == nil {
		q = &keyQueue{}
		st.keys[it.key] = q
	}
	q.items = append(q.items, it)
	if !q.busy && len(q.items) == 1 {
		st.ready = append(st.ready, it.key)
	}
}

// publishOutputs publishes one envelope's outputs in one call, grouped by
// topic (each topic's in the order Handle returned them).
func (s *stageRunner) publishOutputs(ctx context.Context, outs []output) error {
	if len(outs) == 0 {
		return nil
	}
	var batches []Batch
	for _, o := range outs {
		batches = AddToBatch(batches, o.topic, o.env)
	}
	if err := s.publish(ctx, batches...); err != nil {
		return fmt.Errorf("publish outputs: %w", err)
	}
	return nil
}

// commitKeyed commits each partition up to its first envelope in flight.
// A Flusher is flushed first (after the positions were read, so every
// envelope behind them was handled before the Flush); when Flush fails it
// returns the error with nothing committed. A failed commit is only
// logged: everything behind it is durable and will be handled again.
func (s *stageRunner) commitKeyed(ctx context.Context, cl *kgo.Client, st *keyedState) error {
	if st.flushErr {
		return nil // the loop is stopping; what the Flush missed is read again
	}
	offsets := map[int32]kgo.EpochOffset{}
	for p, acks := range st.parts {
		if next, epoch, ok := acks.committable(); ok && next > st.committed[p] {
			offsets[p] = kgo.EpochOffset{Epoch: epoch, Offset: next}
		}
	}
	if s.flusher != nil && st.handled > 0 {
		if err := s.flush(ctx); err != nil {
			st.flushErr = true
			return fmt.Errorf("flush: %w", err)
		}
	}
	st.handled, st.bytes, st.moved = 0, 0, false
	if len(offsets) == 0 {
		return nil
	}
	var lag int64
	for _, l := range st.lag {
		lag += l
	}
	s.lag.Set(float64(lag))
	if err := commit(ctx, cl, s.topic, offsets); err != nil {
		s.commitFailures.Inc()
		s.log.Warn("commit failed", "err", err)
		return nil
	}
	s.commits.Inc()
	for p, o := range offsets {
		st.committed[p] = o.Offset
	}
	return nil
}
