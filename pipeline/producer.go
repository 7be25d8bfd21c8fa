package pipeline

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/schemas"
)

// envelopeSizeHint is the buffer Publish reserves per envelope (a
// request-log envelope with its bodies is about 700 bytes).
const envelopeSizeHint = 1024

// ErrProducerClosed is returned by Publish after Close.
var ErrProducerClosed = errors.New("producer closed")

// MaxEnvelopeBytes is the largest encoded envelope a Producer publishes by
// default (ProducerConfig.MaxEnvelopeBytes). It is sized so that whatever an
// accepted request puts in an envelope fits: the largest body cap of the
// HTTP edge is 16 MiB (spec 8.2), and a payload may be somewhat larger than
// the body it came from (Postgres renders stored JSON with a space after
// every ':' and ','). Handlers that could produce more check that before
// they store anything.
const MaxEnvelopeBytes = 64 << 20

// BrokerMessageMaxBytes is the broker's message.max.bytes (and a topic's
// max.message.bytes) that MaxEnvelopeBytes needs: one envelope in a record
// batch of its own, with the batch and record headers and the key.
const BrokerMessageMaxBytes = MaxEnvelopeBytes + 64<<10

// ProducerConfig configures a Producer. Zero values take the defaults noted
// on each field.
type ProducerConfig struct {
	Brokers     []string // host:port of one or more brokers; required
	TopicPrefix string   // prepended to every topic passed to Publish
	// Security is the TLS and SASL setting of the connections (default
	// plaintext, no SASL).
	Security KafkaSecurity
	// Compression of produce requests: "none" (default), "snappy", "lz4",
	// "zstd" or "gzip". On loopback "none" is fastest (see BenchmarkPublish).
	Compression string
	ClientID    string // default "sendstream"
	// RequestTimeout bounds one produce round trip (default 10s).
	RequestTimeout time.Duration
	// MaxAttempts bounds how often a record is sent when the broker or the
	// connection fails with a retryable error (default 3); the client
	// retries within MaxAttempts·RequestTimeout, and longer while a request
	// with the record is out and its outcome unknown (idempotence).
	MaxAttempts int
	// MaxBatchBytes caps one partition's record batch (default
	// BrokerMessageMaxBytes, what the topics EnsureTopics creates accept).
	// Lower it for topics created with a smaller max.message.bytes; it must
	// stay above MaxEnvelopeBytes plus batch overhead.
	MaxBatchBytes int
	// MaxEnvelopeBytes caps one encoded envelope (default MaxEnvelopeBytes);
	// the broker and its topics must accept messages of this size plus
	// batch overhead (BrokerMessageMaxBytes). A larger envelope is refused
	// with a Permanent error before anything is sent.
	MaxEnvelopeBytes int
	// MaxBufferedRecords bounds the envelopes queued and in flight; Publish
	// waits (within its ctx) while the bound is reached (default 100000).
	MaxBufferedRecords int
	// MetadataTTL is how often partition leaders and counts are re-read
	// (default 10s; at least 1s). A leader that moved is found at once
	// from the broker's answer.
	MetadataTTL time.Duration
	// AutoCreatePartitions, when positive, makes Publish create a missing
	// topic with that many partitions (as EnsureTopics does) instead of
	// failing.
	AutoCreatePartitions int
	// Metrics is where the sendstream_producer_* series are registered
	// (default prometheus.DefaultRegisterer); Producers sharing a
	// registerer share the series.
	Metrics prometheus.Registerer
}

func (c *ProducerConfig) withDefaults() {
	if c.Compression == "" {
		c.Compression = "none"
	}
	if c.ClientID == "" {
		c.ClientID = "sendstream"
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 3
	}
	if c.MaxEnvelopeBytes <= 0 {
		c.MaxEnvelopeBytes = MaxEnvelopeBytes
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = max(BrokerMessageMaxBytes, c.MaxEnvelopeBytes+64<<10)
	}
	if c.MaxBufferedRecords <= 0 {
		c.MaxBufferedRecords = 100000
	}
	if c.MetadataTTL <= 0 {
		c.MetadataTTL = 10 * time.Second
	}
	c.MetadataTTL = max(c.MetadataTTL, time.Second)
	if c.Metrics == nil {
		c.Metrics = prometheus.DefaultRegisterer
	}
}

// Validate reports a configuration that cannot work.
func (c ProducerConfig) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("producer: no brokers configured")
	}
	if _, err := parseCompression(c.Compression); err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	if err := c.Security.Validate(); err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	return nil
}

func parseCompression(s string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(s) {
	case "", "none":
		return kgo.NoCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown compression %q (want none, snappy, lz4, zstd or gzip)", s)
}

// Producer publishes envelopes through franz-go's kgo client with acks=all
// and idempotence on, using group commit: Publish queues its records, and
// one flusher hands everything queued to the client and flushes it (one
// produce request per broker, a record batch per partition), then waits for
// the acks before it takes the next round; so batches grow with load while
// a lone envelope leaves at once. (Left to itself, kgo sends a request as
// soon as one of five slots per broker is free: at 64 callers that made
// batches a third as large and cost 2.4 times the CPU per envelope.) Order per partition (and
// per key) is the order of Publish calls. Each Publish waits for the
// acknowledgement of its own envelopes. A Producer is safe for concurrent
// use; create one per process and Close it last.
type Producer struct {
	cfg ProducerConfig
	cl  *kgo.Client

	closeMu sync.RWMutex // held shared while queueing, exclusively by Close
	closed  bool

	// Group commit: Publish queues records; one flusher hands everything
	// queued to the client (ManualFlushing) and flushes it, one produce
	// request per broker, and takes the next round once every record of
	// this one is acked.
	qmu     sync.Mutex
	queue   []queuedRecord
	wake    chan struct{} // capacity 1
	closing chan struct{} // closed by Close
	flushed chan struct{} // closed when the flusher returned

	created sync.Map   // full topic name -> struct{}: auto-created or seen
	create  sync.Mutex // serialises auto-creation

	m producerMetrics // batches, retries, batchLen and request fed by producerHooks
}

var _ Publisher = (*Producer)(nil)

// queuedRecord is a record waiting for the next round, with its Publish's
// promise.
type queuedRecord struct {
	rec     *kgo.Record
	promise func(*kgo.Record, error)
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

// NewProducer validates cfg and returns a Producer. It checks that a broker
// answers within ctx.
func NewProducer(ctx context.Context, cfg ProducerConfig) (*Producer, error) {
	cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	comp, _ := parseCompression(cfg.Compression)
	sec, err := cfg.Security.Opts()
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	p := &Producer{cfg: cfg}
	p.m = newProducerMetrics(cfg.Metrics)
	hooks := producerHooks{m: p.m}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is on by default
		kgo.ProducerLinger(0),
		kgo.ManualFlushing(),
		kgo.ProducerBatchCompression(comp),
		kgo.ProducerBatchMaxBytes(int32(cfg.MaxBatchBytes)),
		kgo.BrokerMaxWriteBytes(int32(max(100<<20, cfg.MaxBatchBytes+1<<20))),
		kgo.MaxBufferedRecords(cfg.MaxBufferedRecords),
		kgo.ProduceRequestTimeout(cfg.RequestTimeout),
		kgo.RequestTimeoutOverhead(time.Second),
		kgo.RecordDeliveryTimeout(time.Duration(cfg.MaxAttempts) * (cfg.RequestTimeout + time.Second)),
		kgo.UnknownTopicRetries(2),
		kgo.MetadataMaxAge(cfg.MetadataTTL),
		kgo.MetadataMinAge(min(cfg.MetadataTTL, 250*time.Millisecond)),
		kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
			return func(r *kgo.Record, n int) int { return partitionFor(r.Key, n) }
		})),
		kgo.WithHooks(hooks),
	}, sec...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("producer: reach brokers %s: %w", strings.Join(cfg.Brokers, ","), err)
	}
	p.cl = cl
	p.wake, p.closing, p.flushed = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go p.flush()
	return p, nil
}

// producerHooks feeds the per-request and per-batch metrics from kgo.
type producerHooks struct{ m producerMetrics }

// OnBrokerE2E counts produce requests and their round trips.
func (h producerHooks) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != 0 { // produce
		return
	}
	h.m.batches.Inc()
	if e2e.Err() != nil {
		h.m.retries.Inc()
		return
	}
	h.m.request.Observe(e2e.DurationE2E().Seconds())
}

// OnProduceBatchWritten records the envelopes of each acknowledged batch.
func (h producerHooks) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	h.m.batchLen.Observe(float64(m.NumRecords))
}

// Topic returns the full topic name for a topic constant (prefix applied).
func (p *Producer) Topic(topic string) string { return p.cfg.TopicPrefix + topic }

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

// autoCreate creates name the first time it is published to when
// AutoCreatePartitions allows it.
func (p *Producer) autoCreate(ctx context.Context, name string) error {
	if p.cfg.AutoCreatePartitions <= 0 {
		return nil
	}
	if _, ok := p.created.Load(name); ok {
		return nil
	}
	p.create.Lock()
	defer p.create.Unlock()
	if _, ok := p.created.Load(name); ok {
		return nil
	}
	if err := createTopics(ctx, p.cl, []string{name}, p.cfg.AutoCreatePartitions); err != nil {
		return fmt.Errorf("publish %s: %w", name, err)
	}
	p.created.Store(name, struct{}{})
	return nil
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

// partitionFor maps a key to a partition with 32-bit FNV-1a: stable across
// processes and releases.
func partitionFor(key []byte, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write(key)
	return int(h.Sum32() % uint32(n))
}

// backoff returns base·2^attempt capped at max.
func backoff(attempt int, base, max time.Duration) time.Duration {
	if attempt > 30 {
		return max
	}
	d := base << attempt
	if d > max || d <= 0 {
		return max
	}
	return d
}

// Close stops accepting envelopes, waits until everything queued is acked
// or failed (bounded by MaxAttempts·RequestTimeout per record), and closes
// the connections. Publish after Close returns
// ErrProducerClosed.
func (p *Producer) Close() error {
	p.closeMu.Lock()
	if p.closed {
		p.closeMu.Unlock()
		return nil
	}
	p.closed = true
	p.closeMu.Unlock()
	close(p.closing)
	<-p.flushed // every queued record was sent and answered
	p.cl.Close()
	return nil
}
