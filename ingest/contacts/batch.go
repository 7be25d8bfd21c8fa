package contacts

import (
	"context"
	"sync"
	"sync/atomic"
)

// maxBatch bounds the contacts of one upsert statement.
const maxBatch = 256

// pending is one queued upsert. The caller waits on done; it sets abandoned
// when it stops waiting, so a batch not yet started skips it.
type pending struct {
	ws        string
	in        UpsertInput
	custom    *string // in.Fields.CustomFields encoded
	newID     string
	attempts  int
	abandoned atomic.Bool
	done      chan upsertReply // buffered, receives exactly once
}

type upsertReply struct {
	res UpsertResult
	err error
}

// batcher groups concurrent upserts of one workspace into one statement
// (group commit): while a workspace's statement runs, new upserts queue, and
// the next statement takes all of them (emails unique within a statement;
// a repeated email waits for the following one). Creating contacts takes the
// workspace's contact_stats row lock until commit, so statements of one
// workspace run one at a time anyway; grouping them turns that serial section
// into one round trip per batch instead of per request.
type batcher struct {
	exec func(ctx context.Context, ws string, batch []*pending) // replies to, or requeues, every item
	ctx  context.Context                                        // the Store's; cancelled by Close
	wg   sync.WaitGroup

	mu     sync.Mutex
	queues map[string][]*pending
	closed bool
}

// submit queues p and starts the workspace's loop when it is idle. It
// returns false after close.
func (b *batcher) submit(p *pending) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	q, running := b.queues[p.ws]
	b.queues[p.ws] = append(q, p)
	if !running {
		b.wg.Add(1)
		go b.loop(p.ws)
	}
	return true
}

// requeue puts items back at the head of their workspace's queue (they are
// retried by the running loop, which is the caller).
func (b *batcher) requeue(ws string, items []*pending) {
	b.mu.Lock()
	b.queues[ws] = append(append([]*pending(nil), items...), b.queues[ws]...)
	b.mu.Unlock()
}

// loop runs batches for ws until its queue is empty, then removes the queue
// (a later submit starts a new loop).
func (b *batcher) loop(ws string) {
	defer b.wg.Done()
	for {
		b.mu.Lock()
		q := b.queues[ws]
		if len(q) == 0 {
			delete(b.queues, ws)
			b.mu.Unlock()
			return
		}
		batch, rest := takeBatch(q)
		if len(rest) == 0 {
			b.queues[ws] = q[:0:0]
		} else {
			b.queues[ws] = rest
		}
		b.mu.Unlock()
		b.exec(b.ctx, ws, batch)
	}
}

// takeBatch splits q into up to maxBatch live items with distinct emails
// (in queue order) and the rest. Abandoned items are dropped.
func takeBatch(q []*pending) (batch, rest []*pending) {
	seen := make(map[string]struct{}, min(len(q), maxBatch))
	for _, p := range q {
		if p.abandoned.Load() {
			continue
		}
		if _, dup := seen[p.in.Email]; dup || len(batch) == maxBatch {
			rest = append(rest, p)
			continue
		}
		seen[p.in.Email] = struct{}{}
		batch = append(batch, p)
	}
	return batch, rest
}

// close stops accepting work and waits for the running loops.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
}
