package pipeline

import (
	"context"
	"fmt"
	"strings"
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

// typeHeader and workspaceHeader are the record headers carrying the
// envelope's type and workspace (the latter only when it has one): a
// consumer can pass over a record by them without decoding it.
const (
	typeHeader      = "type"
	workspaceHeader = "workspace"
)

// Publish JSON-encodes envs and produces them to TopicPrefix+topic with
// acks=all, each to partition hash(env.Key) mod partitions (env.ID when the
// key is empty); each record carries the envelope type in a "type" header
// and its workspace, when it has one, in a "workspace" header.
// It returns nil once every envelope is acknowledged, the first produce
// error (wrapped) otherwise, or ctx's error when ctx ends first (the
// envelopes may still be written then). Encoding errors and oversized
// envelopes are Permanent. Safe for concurrent use.
func (p *Producer) Publish(ctx context.Context, topic string, envs ...schemas.Envelope) error {
	return p.PublishBatches(ctx, Batch{Topic: topic, Envs: envs})
}

// PublishBatches is Publish for several topics at once: every record joins
// the same group-commit round and the call waits once for all the
// acknowledgements. Nothing is queued when an envelope cannot be encoded.
func (p *Producer) PublishBatches(ctx context.Context, batches ...Batch) error {
	n := 0
	for _, b := range batches {
		n += len(b.Envs)
	}
	if n == 0 {
		return nil
	}
	start := time.Now()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publish %s: %w", p.names(batches), err)
	}
	c := newCall(n)
	recs, hdrs := c.recs[:], c.hdrs[:]
	if n > len(recs) {
		recs, hdrs = make([]kgo.Record, n), make([]kgo.RecordHeader, 2*n)
	}
	// One buffer holds every encoded value and key of this call: sized for
	// the usual envelope, it grows (and earlier values keep the old array)
	// when needed. It goes back to the pool once every record is answered
	// (nothing refers to it then), not when ctx ends first.
	bp := getPublishBuf(n * envelopeSizeHint)
	buf, i := (*bp)[:0], 0
	for _, b := range batches {
		name := p.cfg.TopicPrefix + b.Topic
		for j := range b.Envs {
			var err error
			if buf, err = p.appendRecord(buf, name, &b.Envs[j], &recs[i], hdrs[2*i:2*i+2:2*i+2]); err != nil {
				c.release()
				return err
			}
			i++
		}
	}
	if err := p.enqueue(ctx, batches, recs[:n], c); err != nil {
		c.release()
		return err
	}
	select {
	case <-c.done:
		*bp = buf[:0]
		putPublishBuf(bp)
		err := c.err
		c.release()
		if err != nil {
			p.m.errors.Add(float64(n))
			return err
		}
		p.m.messages.Add(float64(n))
		p.m.ack.Observe(time.Since(start).Seconds())
		return nil
	case <-ctx.Done():
		return fmt.Errorf("publish %s: waiting for ack: %w", p.names(batches), ctx.Err())
	}
}

// appendRecord encodes env onto buf and points rec at the encoded value
// and key, for topic name, and at its headers in hdr (two long), whose
// values are also written onto buf.
func (p *Producer) appendRecord(buf []byte, name string, env *schemas.Envelope, rec *kgo.Record, hdr []kgo.RecordHeader) ([]byte, error) {
	start := len(buf)
	buf, err := schemas.AppendEnvelope(buf, env)
	if err != nil {
		return buf, Permanent(fmt.Errorf("publish %s: encode envelope %s: %w", name, env.ID, err))
	}
	v := buf[start:len(buf):len(buf)]
	if len(v) > p.cfg.MaxEnvelopeBytes {
		return buf, Permanent(fmt.Errorf("publish %s: envelope %s is %d bytes, over the %d limit", name, env.ID, len(v), p.cfg.MaxEnvelopeBytes))
	}
	key := env.Key
	if key == "" {
		key = env.ID
	}
	ks := len(buf)
	buf = append(buf, key...)
	ts := len(buf)
	buf = append(buf, env.Type...)
	ws := len(buf)
	buf = append(buf, env.Workspace...)
	hdr[0] = kgo.RecordHeader{Key: typeHeader, Value: buf[ts:ws:ws]}
	hdrs := hdr[:1]
	if env.Workspace != "" {
		hdr[1] = kgo.RecordHeader{Key: workspaceHeader, Value: buf[ws:len(buf):len(buf)]}
		hdrs = hdr[:2]
	}
	*rec = kgo.Record{Topic: name, Key: buf[ks:ts:ts], Value: v, Headers: hdrs}
	return buf, nil
}

// enqueue creates the batches' topics when needed and queues recs for the
// flusher, each answering c, then wakes the flusher.
func (p *Producer) enqueue(ctx context.Context, batches []Batch, recs []kgo.Record, c *call) error {
	// Held shared while queueing, so Close (exclusive) sees every record
	// queued.
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if p.closed {
		return ErrProducerClosed
	}
	for _, b := range batches {
		if len(b.Envs) > 0 {
			if err := p.autoCreate(ctx, p.cfg.TopicPrefix+b.Topic); err != nil {
				return err
			}
		}
	}
	p.qmu.Lock()
	for i := range recs {
		p.queue = append(p.queue, queuedRecord{rec: &recs[i], promise: c.promise})
	}
	p.qmu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return nil
}

// names lists the full topic names of batches, for errors.
func (p *Producer) names(batches []Batch) string {
	names := make([]string, 0, len(batches))
	for _, b := range batches {
		names = append(names, p.cfg.TopicPrefix+b.Topic)
	}
	return strings.Join(names, ",")
}

// call tracks one Publish: it completes when every record is acked or one
// failed.
type call struct {
	remaining atomic.Int32
	errMu     sync.Mutex
	err       error               // the first error, under errMu
	done      chan struct{}       // receives once, when remaining reaches zero
	recs      [4]kgo.Record       // backing array of the usual call's records
	hdrs      [8]kgo.RecordHeader // two per record
	promise   func(*kgo.Record, error)
}

func (c *call) complete(r *kgo.Record, err error) {
	if err != nil {
		c.errMu.Lock()
		if c.err == nil && r != nil {
			c.err = fmt.Errorf("publish %s: %w", r.Topic, err)
		} else if c.err == nil {
			c.err = fmt.Errorf("publish: %w", err)
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
	c.hdrs = [8]kgo.RecordHeader{}
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
