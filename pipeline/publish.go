package pipeline

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/schemas"
)

// This file holds Publish: encoding envelopes into records, queueing them
// for the flusher and waiting for their acknowledgement.

// envelopeSizeHint is the buffer Publish reserves per envelope (a
// request-log envelope with its bodies is about 700 bytes).
const envelopeSizeHint = 1024

// typeHeader is the record header carrying the envelope type.
const typeHeader = "type"

// Publish JSON-encodes envs and produces them to TopicPrefix+topic with
// acks=all, each to partition hash(env.Key) mod partitions (env.ID when the
// key is empty); each record carries the envelope type in a "type" header.
// It returns nil once every envelope is acknowledged, the first produce
// error (wrapped) otherwise, or ctx's error when ctx ends first (the
// envelopes may still be written then). Encoding errors and oversized
// envelopes are Permanent. Safe for concurrent use.
func (p *Producer) Publish(ctx context.Context, topic string, envs ...schemas.Envelope) error {
	if len(envs) == 0 {
		return nil
	}
	start := time.Now()
	name := p.cfg.TopicPrefix + topic
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publish %s: %w", name, err)
	}
	c := newCall(len(envs))
	recs, hdrs := c.recs[:], c.hdrs[:]
	if len(envs) > len(recs) {
		recs, hdrs = make([]kgo.Record, len(envs)), make([]kgo.RecordHeader, len(envs))
	}
	// One buffer holds every encoded value and key of this call: sized for
	// the usual envelope, it grows (and earlier values keep the old array)
	// when needed. It goes back to the pool once every record is answered
	// (nothing refers to it then), not when ctx ends first.
	bp := getPublishBuf(len(envs) * envelopeSizeHint)
	buf := (*bp)[:0]
	for i := range envs {
		start := len(buf)
		var err error
		buf, err = schemas.AppendEnvelope(buf, &envs[i])
		if err != nil {
			c.release()
			return Permanent(fmt.Errorf("publish %s: encode envelope %s: %w", name, envs[i].ID, err))
		}
		v := buf[start:len(buf):len(buf)]
		if len(v) > p.cfg.MaxEnvelopeBytes {
			c.release()
			return Permanent(fmt.Errorf("publish %s: envelope %s is %d bytes, over the %d limit", name, envs[i].ID, len(v), p.cfg.MaxEnvelopeBytes))
		}
		key := envs[i].Key
		if key == "" {
			key = envs[i].ID
		}
		ks := len(buf)
		buf = append(buf, key...)
		hdrs[i] = kgo.RecordHeader{Key: typeHeader, Value: []byte(envs[i].Type)}
		recs[i] = kgo.Record{Topic: name, Key: buf[ks:len(buf):len(buf)], Value: v, Headers: hdrs[i : i+1 : i+1]}
	}
	// Held shared while queueing, so Close (exclusive) sees every record
	// queued.
	p.closeMu.RLock()
	if p.closed {
		p.closeMu.RUnlock()
		c.release()
		return ErrProducerClosed
	}
	if err := p.autoCreate(ctx, name); err != nil {
		p.closeMu.RUnlock()
		c.release()
		return err
	}
	p.qmu.Lock()
	for i := range envs {
		p.queue = append(p.queue, queuedRecord{rec: &recs[i], promise: c.promise})
	}
	p.qmu.Unlock()
	p.closeMu.RUnlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	select {
	case <-c.done:
		*bp = buf[:0]
		putPublishBuf(bp)
		err := c.err
		c.release()
		if err != nil {
			p.m.errors.Add(float64(len(envs)))
			return fmt.Errorf("publish %s: %w", name, err)
		}
		p.m.messages.Add(float64(len(envs)))
		p.m.ack.Observe(time.Since(start).Seconds())
		return nil
	case <-ctx.Done():
		return fmt.Errorf("publish %s: waiting for ack: %w", name, ctx.Err())
	}
}

// call tracks one Publish: it completes when every record is acked or one
// failed.
type call struct {
	remaining atomic.Int32
	errMu     sync.Mutex
	err       error         // the first error, under errMu
	done      chan struct{} // receives once, when remaining reaches zero
	recs      [4]kgo.Record // backing array of the usual call's records
	hdrs      [4]kgo.RecordHeader
	promise   func(*kgo.Record, error)
}

func (c *call) complete(_ *kgo.Record, err error) {
	if err != nil {
		c.errMu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.errMu.Unlock()
	}
	if c.remaining.Add(-1) == 0 {
		c.done <- struct{}{} // buffered: never blocks; c is not touched after
	}
}

// calls recycles calls that were answered: by then the client no longer
// refers to their records. A call whose caller gave up (ctx) is left to the
// GC.
var calls = sync.Pool{New: func() any {
	c := &call{done: make(chan struct{}, 1)}
	c.promise = c.complete
	return c
}}

// newCall returns a call awaiting n records.
func newCall(n int) *call {
	c := calls.Get().(*call)
	c.remaining.Store(int32(n))
	return c
}

// release returns an answered call to the pool.
func (c *call) release() {
	c.err = nil
	c.recs = [4]kgo.Record{}
	c.hdrs = [4]kgo.RecordHeader{}
	calls.Put(c)
}

// publishBufs recycles Publish's encoding buffers: a request-log envelope
// is about 700 bytes, allocated on every API call otherwise.
var publishBufs sync.Pool

func getPublishBuf(size int) *[]byte {
	if bp, ok := publishBufs.Get().(*[]byte); ok && cap(*bp) >= size {
		return bp
	}
	b := make([]byte, 0, size)
	return &b
}

// putPublishBuf returns a buffer; very large ones are left to the GC.
func putPublishBuf(bp *[]byte) {
	if cap(*bp) <= 64<<10 {
		publishBufs.Put(bp)
	}
}
