package pipeline

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// This file holds the Producer's group commit: one flusher goroutine hands
// everything queued to the client and waits for the acks before the next
// round.

// queuedRecord is a record waiting for the next round, with its Publish's
// promise.
type queuedRecord struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
}

// flush is the flusher goroutine: it hands what is queued to the client,
// at most MaxBufferedRecords at a time, flushes it (the client sends one
// produce request per broker with every partition's batch) and waits for
// the acks before the next round, so under load batches grow with the
// round trip (group commit). It returns once Close asked and the queue is
// empty.
func (p *Producer) flush() {
	defer close(p.flushed)
	var round []queuedRecord
	for {
		p.qmu.Lock()
		n := min(len(p.queue), p.cfg.MaxBufferedRecords)
		round = append(round[:0], p.queue[:n]...)
		rest := copy(p.queue, p.queue[n:])
		clear(p.queue[rest:])
		p.queue = p.queue[:rest]
		p.qmu.Unlock()
		if len(round) == 0 {
			select {
			case <-p.wake:
				continue
			case <-p.closing:
				p.qmu.Lock()
				empty := len(p.queue) == 0
				p.qmu.Unlock()
				if empty {
					return
				}
				continue
			}
		}
		for _, q := range round {
			p.cl.Produce(context.Background(), q.rec, q.promise)
		}
		// Flush returns once every record handed over is acked or failed
		// (each bounded by RecordDeliveryTimeout); failures reach the
		// promises.
		_ = p.cl.Flush(context.Background())
		clear(round)
	}
}
