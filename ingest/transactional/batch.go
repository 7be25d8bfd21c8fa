package transactional

import (
	"context"
	"sync"
	"time"
)

// batcher runs concurrent calls of one statement as shared statements
// (group commit): up to workers statements are in flight; each takes
// whatever calls are waiting (at most max), so under load many calls share
// one round trip and when idle a call runs at once. Workers start on first
// use and stop when the batcher is closed.
type batcher[In, Out any] struct {
	workers, max int
	timeout      time.Duration
	run          func(ctx context.Context, in []In) ([]Out, error)

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

func (b *batcher[In, Out]) start() {
	b.ctx, b.stop = context.WithCancel(context.Background())
	b.queue = make(chan *batchCall[In, Out], 4096)
	for i := 0; i < b.workers; i++ {
		b.wg.Add(1)
		go b.loop()
	}
}

// do runs one call through a shared statement and returns its result. ctx
// bounds the wait; the statement itself runs with the batcher's time-out.
func (b *batcher[In, Out]) do(ctx context.Context, in In) (Out, error) {
	b.once.Do(b.start)
	c := &batchCall[In, Out]{in: in, done: make(chan struct{})}
	select {
	case b.queue <- c:
	case <-ctx.Done():
		var zero Out
		return zero, ctx.Err()
	}
	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
		var zero Out
		return zero, ctx.Err()
	}
}

func (b *batcher[In, Out]) loop() {
	defer b.wg.Done()
	calls := make([]*batchCall[In, Out], 0, b.max)
	ins := make([]In, 0, b.max)
	for {
		calls, ins = calls[:0], ins[:0]
		select {
		case c := <-b.queue:
			calls = append(calls, c)
		case <-b.ctx.Done():
			return
		}
	fill:
		for len(calls) < b.max {
			select {
			case c := <-b.queue:
				calls = append(calls, c)
			default:
				break fill
			}
		}
		for _, c := range calls {
			ins = append(ins, c.in)
		}
		ctx, cancel := context.WithTimeout(b.ctx, b.timeout)
		outs, err := b.run(ctx, ins)
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

// close stops the workers after the statements in flight.
func (b *batcher[In, Out]) close() {
	b.once.Do(func() {})
	if b.stop != nil {
		b.stop()
		b.wg.Wait()
	}
}
