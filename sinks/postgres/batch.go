package postgres

import (
	"context"
	"sync"
	"time"
)

// Batcher runs concurrent calls of one statement as shared statements
// (group commit): up to Workers statements are in flight; each takes
// whatever calls are waiting (at most Max), so under load many calls share
// one round trip and when idle a call runs at once. Workers start on first
// use and stop on Close. Set the fields before the first Do and do not
// change them after.
//
// Run executes one statement for a batch of inputs and returns one output
// per input, in input order; an error fails every call of the batch. It
// runs on a Batcher worker with a context bounded by Timeout.
type Batcher[In, Out any] struct {
	Workers int           // statements in flight at once (default 1)
	Max     int           // calls per statement at most (default 256)
	Timeout time.Duration // bound of one statement (default 10s)
	// Linger, when positive, lets a worker whose last statement carried
	// more than one call wait up to this long after the next batch's first
	// call for more (until Max): calls that finish one by one, as hand-offs
	// do, then share a statement instead of each arriving alone during a
	// short one. After a statement of one call (light load) the next call
	// runs at once.
	Linger time.Duration
	Run    func(ctx context.Context, in []In) ([]Out, error)

	once  sync.Once
	queue chan *batchCall[In, Out]
	stop  context.CancelFunc
	ctx   context.Context
	wg    sync.WaitGroup
}

type batchCall[In, Out any] struct {
	in   In
	out  Out
	err  error
	done chan struct{}
}

func (b *Batcher[In, Out]) start() {
	if b.Workers <= 0 {
		b.Workers = 1
	}
	if b.Max <= 0 {
		b.Max = 256
	}
	if b.Timeout <= 0 {
		b.Timeout = 10 * time.Second
	}
	b.ctx, b.stop = context.WithCancel(context.Background())
	b.queue = make(chan *batchCall[In, Out], 4096)
	for i := 0; i < b.Workers; i++ {
		b.wg.Add(1)
		go b.loop()
	}
}

// Do runs one call through a shared statement and returns its result. It
// is safe for concurrent use. ctx bounds the wait: when it ends first Do
// returns ctx's error, though the statement may still run with the call in
// it (Run must be safe to apply to an abandoned input, as an idempotent
// write is). The statement itself runs with the Batcher's Timeout. Calls
// after Close wait for ctx.
func (b *Batcher[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	var zero Out
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	b.once.Do(b.start)
	c := &batchCall[In, Out]{in: in, done: make(chan struct{})}
	select {
	case b.queue <- c:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

func (b *Batcher[In, Out]) loop() {
	defer b.wg.Done()
	calls := make([]*batchCall[In, Out], 0, b.Max)
	ins := make([]In, 0, b.Max)
	shared := false // the last statement carried more than one call
	for {
		calls, ins = calls[:0], ins[:0]
		select {
		case c := <-b.queue:
			calls = append(calls, c)
		case <-b.ctx.Done():
			return
		}
		calls = b.fill(calls)
		if shared && b.Linger > 0 && len(calls) < b.Max {
			calls = b.linger(calls)
		}
		shared = len(calls) > 1
		for _, c := range calls {
			ins = append(ins, c.in)
		}
		ctx, cancel := context.WithTimeout(b.ctx, b.Timeout)
		outs, err := b.Run(ctx, ins)
		cancel()
		for i, c := range calls {
			if err != nil {
				c.err = err
			} else {
				c.out = outs[i]
			}
			close(c.done)
		}
	}
}

// fill adds the calls waiting in the queue to calls, up to Max.
func (b *Batcher[In, Out]) fill(calls []*batchCall[In, Out]) []*batchCall[In, Out] {
	for len(calls) < b.Max {
		select {
		case c := <-b.queue:
			calls = append(calls, c)
		default:
			return calls
		}
	}
	return calls
}

// linger adds the calls that arrive within Linger to calls, up to Max.
func (b *Batcher[In, Out]) linger(calls []*batchCall[In, Out]) []*batchCall[In, Out] {
	t := time.NewTimer(b.Linger)
	defer t.Stop()
	for len(calls) < b.Max {
		select {
		case c := <-b.queue:
			calls = append(calls, c)
		case <-t.C:
			return calls
		case <-b.ctx.Done():
			return calls
		}
	}
	return calls
}

// Close stops the workers after the statements in flight. Safe to call
// when the Batcher was never used, and more than once.
func (b *Batcher[In, Out]) Close() {
	b.once.Do(func() {})
	if b.stop != nil {
		b.stop()
		b.wg.Wait()
	}
}
