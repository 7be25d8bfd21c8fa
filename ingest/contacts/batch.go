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

// maxInFlight bounds the statements of one workspace running at once. Two
// keep Postgres busy while one batch's answer travels back; four split the
// same load into smaller statements, each with its fixed cost (contacts
// bench: 4.7k upserts/s and page p99 11 ms with two, 3.8k/s and 35 ms with
// four).
const maxInFlight = 2

// extraRunnerQueue is the queue length that starts another statement while
// one is running.
const extraRunnerQueue = 16

// batcher groups concurrent upserts of one workspace into shared statements
// (group commit): while a workspace's statements run, new upserts queue, and
// each free runner takes everything queued into its next statement. Up to
// maxInFlight statements of a workspace run at once; an email is never in
// two of them (a repeated email waits for the statement holding it), so
// batches of one process never contend for the same contact row.
type batcher struct {
	// exec runs one statement for ws with counter shard slot and replies
	// to, or requeues, every item.
	exec func(ctx context.Context, ws string, slot int, batch []*pending)
	ctx  context.Context // the Store's; cancelled by Close
	wg   sync.WaitGroup

	mu     sync.Mutex
	queues map[string]*wsQueue
	closed bool
}

// wsQueue is one workspace's waiting upserts and running statements.
type wsQueue struct {
	items    []*pending
	running  int                 // runner goroutines
	slots    [maxInFlight]bool   // counter shards taken by runners
	inFlight map[string]struct{} // emails of the statements running
}

// submit queues p and starts a runner when the workspace has fewer than
// maxInFlight. It returns false after close.
func (b *batcher) submit(p *pending) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	q := b.queues[p.ws]
	if q == nil {
		q = &wsQueue{inFlight: map[string]struct{}{}}
		b.queues[p.ws] = q
	}
	q.items = append(q.items, p)
	// A second (third, ...) statement starts only when enough is queued:
	// at low load one runner batching everything waiting is cheapest (one
	// commit per batch); under load, statements overlap.
	if q.running == 0 || q.running < maxInFlight && len(q.items) >= extraRunnerQueue {
		q.running++
		slot := 0
		for q.slots[slot] {
			slot++
		}
		q.slots[slot] = true
		b.wg.Add(1)
		go b.loop(p.ws, q, slot)
	}
	return true
}

// requeue puts items back at the head of their workspace's queue; the
// calling runner picks them up next.
func (b *batcher) requeue(ws string, items []*pending) {
	b.mu.Lock()
	q := b.queues[ws]
	q.items = append(append([]*pending(nil), items...), q.items...)
	b.mu.Unlock()
}

// loop runs statements for ws until nothing it may take is queued; its
// statements bump counter shard slot.
func (b *batcher) loop(ws string, q *wsQueue, slot int) {
	defer b.wg.Done()
	for {
		b.mu.Lock()
		batch, rest := takeBatch(q.items, q.inFlight)
		q.items = rest
		if len(batch) == 0 {
			q.running--
			q.slots[slot] = false
			if q.running == 0 && len(q.items) == 0 {
				delete(b.queues, ws)
			}
			b.mu.Unlock()
			return
		}
		for _, p := range batch {
			q.inFlight[p.in.Email] = struct{}{}
		}
		b.mu.Unlock()
		b.exec(b.ctx, ws, slot, batch)
		b.mu.Lock()
		for _, p := range batch {
			delete(q.inFlight, p.in.Email)
		}
		b.mu.Unlock()
	}
}

// takeBatch splits q into up to maxBatch live items with distinct emails
// not in busy (in queue order) and the rest. Abandoned items are dropped.
func takeBatch(q []*pending, busy map[string]struct{}) (batch, rest []*pending) {
	seen := make(map[string]struct{}, min(len(q), maxBatch))
	for _, p := range q {
		if p.abandoned.Load() {
			continue
		}
		_, dup := seen[p.in.Email]
		_, held := busy[p.in.Email]
		if dup || held || len(batch) == maxBatch {
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
