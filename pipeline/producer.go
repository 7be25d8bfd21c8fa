package pipeline

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	// Compression of produce requests: "none" (default), "snappy", "lz4",
	// "zstd" or "gzip". On loopback "none" is fastest (see BenchmarkPublish).
	Compression string
	ClientID    string // default "sendstream"
	// RequestTimeout bounds one produce round trip (default 10s).
	RequestTimeout time.Duration
	// MaxAttempts is how often a batch is sent when the broker or the
	// connection fails with a retryable error (default 3).
	MaxAttempts int
	// MaxBatchBytes caps the encoded envelopes of one partition in one
	// produce request (default 900 KiB, under the broker's default
	// message.max.bytes). A larger envelope goes in a batch of its own.
	MaxBatchBytes int
	// MaxEnvelopeBytes caps one encoded envelope (default MaxEnvelopeBytes);
	// the broker and its topics must accept messages of this size plus
	// batch overhead (BrokerMessageMaxBytes). A larger envelope is refused
	// with a Permanent error before anything is sent.
	MaxEnvelopeBytes int
	// MaxRequestBytes caps one produce request across partitions (default
	// 16 MiB).
	MaxRequestBytes int
	// InFlight is how many produce requests may be out to one broker at
	// once, each on its own connection (default 2). A partition is in at
	// most one of them, so its order holds.
	InFlight int
	// OverlapAfter is how long a request must have been out before another
	// one joins it (default 2ms). Work that arrives while a request is out
	// normally waits and goes in the next one (group commit: at saturation
	// round trips are short and batches stay large); when a round trip is
	// slow, the work waits no longer than this instead of the whole slow
	// round trip.
	OverlapAfter time.Duration
	// MetadataTTL is how long partition counts are cached (default 10s).
	MetadataTTL time.Duration
	// AutoCreatePartitions, when positive, makes Publish create a missing
	// topic with that many partitions instead of failing.
	AutoCreatePartitions int
	// Metrics receives the producer metrics (default DefaultMetrics).
	Metrics *Registry
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
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = 900 << 10
	}
	if c.MaxEnvelopeBytes <= 0 {
		c.MaxEnvelopeBytes = MaxEnvelopeBytes
	}
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = 16 << 20
	}
	if c.InFlight <= 0 {
		c.InFlight = 2
	}
	if c.OverlapAfter <= 0 {
		c.OverlapAfter = 2 * time.Millisecond
	}
	if c.MetadataTTL <= 0 {
		c.MetadataTTL = 10 * time.Second
	}
	if c.Metrics == nil {
		c.Metrics = DefaultMetrics
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
	return nil
}

func parseCompression(s string) (kafka.Compression, error) {
	switch strings.ToLower(s) {
	case "", "none":
		return 0, nil
	case "snappy":
		return kafka.Snappy, nil
	case "lz4":
		return kafka.Lz4, nil
	case "zstd":
		return kafka.Zstd, nil
	case "gzip":
		return kafka.Gzip, nil
	}
	return 0, fmt.Errorf("unknown compression %q (want none, snappy, lz4, zstd or gzip)", s)
}

// Producer publishes envelopes with acks=all using group commit. Messages
// are queued per topic partition; one flusher goroutine per partition leader
// (broker) sends everything queued for that broker's partitions as one
// produce request as soon as its previous request returned, with at most one
// request in flight per partition, so order per partition (and per key) is
// the order of Publish calls. Each Publish waits for the acknowledgement of
// its own messages. A Producer is safe for concurrent use; create one per
// process and Close it last.
type Producer struct {
	cfg       ProducerConfig
	codec     compress.Codec // of record batches; nil: none
	client    *kafka.Client
	transport *kafka.Transport

	closeMu sync.RWMutex // held shared while enqueuing, exclusively by Close
	closed  bool

	mu       sync.RWMutex
	topics   map[string]*topicState   // by full (prefixed) topic name
	flushers map[int32]*brokerFlusher // by leader broker id
	brokers  map[int32]string         // host:port by broker id, from metadata
	create   sync.Mutex               // serialises auto-creation
	bgCtx    context.Context          // flushers' requests; cancelled after Close drained
	stop     context.CancelFunc
	wg       sync.WaitGroup

	mBatches  *Counter
	mMessages *Counter
	mErrors   *Counter
	mRetries  *Counter
	mAck      *Histogram
	mBatchLen *Histogram
	mRequest  *Histogram
}

var _ Publisher = (*Producer)(nil)

type topicState struct {
	name string
	// fetchedAt is when the layout was last read (unix nanoseconds); 0
	// forces a refresh. Read without p.mu, so atomic.
	fetchedAt atomic.Int64
	// refreshing is set while one caller re-reads a stale layout; the
	// others keep publishing with the old one meanwhile.
	refreshing atomic.Bool
	parts      []*partQueue
}

// partQueue holds the messages waiting for one topic partition.
type partQueue struct {
	topic     string
	partition int32
	leader    atomic.Pointer[brokerFlusher]

	mu        sync.Mutex
	pending   []queued
	scheduled bool // listed in a flusher's ready list
	inflight  bool // a request with this partition's messages is out
}

// brokerFlusher sends the queued messages of the partitions one broker leads,
// on InFlight goroutines, each with its own connection (no hand-off per
// request).
type brokerFlusher struct {
	id      int32
	mu      sync.Mutex
	out     int       // requests out now
	lastOut time.Time // when the latest of them was sent
	ready   []*partQueue
	wake    chan struct{} // capacity 1
	closing bool
}

// done records that a flusher's request (or its turn, when it had nothing
// to send) is over.
func (bf *brokerFlusher) done() {
	bf.mu.Lock()
	bf.out--
	bf.mu.Unlock()
}

type queued struct {
	key, value []byte
	typ        string
	attempts   int
	call       *call
}

// call tracks one Publish: it completes when every message is acked or one
// failed.
type call struct {
	remaining atomic.Int32
	errMu     sync.Mutex
	err       error         // the first error, under errMu
	done      chan struct{} // receives once, when remaining reaches zero
	msgs      [4]queued     // backing array of the usual call's messages
}

func (c *call) complete(err error) {
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

// calls recycles calls that were answered: by then no queue or flusher
// refers to them. A call whose caller gave up (ctx) is left to the GC.
var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// newCall returns a call awaiting n messages.
func newCall(n int) *call {
	c := calls.Get().(*call)
	c.remaining.Store(int32(n))
	return c
}

// release returns an answered call to the pool.
func (c *call) release() {
	c.err = nil
	c.msgs = [4]queued{}
	calls.Put(c)
}

// NewProducer validates cfg and returns a Producer. It checks that a broker
// answers a metadata request within ctx.
func NewProducer(ctx context.Context, cfg ProducerConfig) (*Producer, error) {
	cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	comp, _ := parseCompression(cfg.Compression)
	bg, stop := context.WithCancel(context.Background())
	tr := &kafka.Transport{
		ClientID:    cfg.ClientID,
		DialTimeout: 5 * time.Second,
		IdleTimeout: 5 * time.Minute,
		MetadataTTL: 6 * time.Second,
		Context:     bg,
	}
	addr := kafka.TCP(cfg.Brokers...)
	p := &Producer{
		cfg:       cfg,
		codec:     comp.Codec(),
		transport: tr,
		client:    &kafka.Client{Addr: addr, Timeout: cfg.RequestTimeout, Transport: tr},
		topics:    map[string]*topicState{},
		flushers:  map[int32]*brokerFlusher{},
		brokers:   map[int32]string{},
		bgCtx:     bg,
		stop:      stop,
	}
	m := cfg.Metrics
	m.Help("sendstream_producer_batches_total", "Produce requests sent (group commits).")
	m.Help("sendstream_producer_messages_total", "Envelopes acknowledged by the broker.")
	m.Help("sendstream_producer_errors_total", "Envelopes whose produce failed.")
	m.Help("sendstream_producer_retries_total", "Produce requests retried after a retryable failure.")
	m.Help("sendstream_producer_ack_seconds", "Time from Publish to the broker's acknowledgement of all its envelopes.")
	m.Help("sendstream_producer_batch_messages", "Envelopes per produce request.")
	m.Help("sendstream_producer_request_seconds", "Round trip of one produce request (write, broker fsync, response).")
	p.mBatches = m.Counter("sendstream_producer_batches_total")
	p.mMessages = m.Counter("sendstream_producer_messages_total")
	p.mErrors = m.Counter("sendstream_producer_errors_total")
	p.mRetries = m.Counter("sendstream_producer_retries_total")
	p.mAck = m.Histogram("sendstream_producer_ack_seconds", nil)
	p.mBatchLen = m.Histogram("sendstream_producer_batch_messages", []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096})
	p.mRequest = m.Histogram("sendstream_producer_request_seconds", nil)

	if _, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}}); err != nil {
		stop()
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("producer: reach brokers %s: %w", strings.Join(cfg.Brokers, ","), err)
	}
	return p, nil
}

// Topic returns the full topic name for a topic constant (prefix applied).
func (p *Producer) Topic(topic string) string { return p.cfg.TopicPrefix + topic }

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
	c := newCall(len(envs))
	msgs := c.msgs[:]
	if len(envs) > len(msgs) {
		msgs = make([]queued, len(envs))
	}
	msgs = msgs[:len(envs)]
	// One buffer holds every encoded value and key of this call: sized for
	// the usual envelope, it grows (and earlier values keep the old array)
	// when needed. It goes back to the pool once every message is answered
	// (nothing refers to it then), not when ctx ends first.
	bp := getPublishBuf(len(envs) * envelopeSizeHint)
	buf := (*bp)[:0]
	for i := range envs {
		start := len(buf)
		var err error
		buf, err = schemas.AppendEnvelope(buf, &envs[i])
		if err != nil {
			return Permanent(fmt.Errorf("publish %s: encode envelope %s: %w", name, envs[i].ID, err))
		}
		v := buf[start:len(buf):len(buf)]
		if len(v) > p.cfg.MaxEnvelopeBytes {
			return Permanent(fmt.Errorf("publish %s: envelope %s is %d bytes, over the %d limit", name, envs[i].ID, len(v), p.cfg.MaxEnvelopeBytes))
		}
		key := envs[i].Key
		if key == "" {
			key = envs[i].ID
		}
		ks := len(buf)
		buf = append(buf, key...)
		msgs[i] = queued{key: buf[ks:len(buf):len(buf)], value: v, typ: envs[i].Type, call: c}
	}
	// Held shared until the messages are queued, so Close (exclusive) sees
	// every flusher and every queued message.
	p.closeMu.RLock()
	if p.closed {
		p.closeMu.RUnlock()
		return ErrProducerClosed
	}
	ts, err := p.topic(ctx, name)
	if err != nil {
		p.closeMu.RUnlock()
		return err
	}
	for i := range msgs {
		p.enqueue(ts.parts[partitionFor(msgs[i].key, len(ts.parts))], msgs[i])
	}
	p.closeMu.RUnlock()
	select {
	case <-c.done:
		*bp = buf[:0]
		putPublishBuf(bp)
		err := c.err
		c.release()
		if err != nil {
			return fmt.Errorf("publish %s: %w", ts.name, err)
		}
		p.mAck.ObserveSince(start)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("publish %s: waiting for ack: %w", ts.name, ctx.Err())
	}
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

// enqueue appends m to q and makes sure q's leader will send it.
func (p *Producer) enqueue(q *partQueue, m queued) {
	q.mu.Lock()
	q.pending = append(q.pending, m)
	p.scheduleLocked(q)
	q.mu.Unlock()
}

// scheduleLocked lists q with its leader's flusher unless it is already
// listed or in flight (its flusher relists it when the request returns).
// q.mu must be held.
func (p *Producer) scheduleLocked(q *partQueue) {
	if q.scheduled || q.inflight || len(q.pending) == 0 {
		return
	}
	q.scheduled = true
	bf := q.leader.Load()
	bf.mu.Lock()
	bf.ready = append(bf.ready, q)
	bf.mu.Unlock()
	select {
	case bf.wake <- struct{}{}:
	default:
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

// topic returns the cached partition layout of a topic, refreshing it when
// older than MetadataTTL: one caller refreshes, concurrent ones use the old
// layout meanwhile.
func (p *Producer) topic(ctx context.Context, name string) (*topicState, error) {
	p.mu.RLock()
	ts, ok := p.topics[name]
	p.mu.RUnlock()
	if ok {
		if time.Since(time.Unix(0, ts.fetchedAt.Load())) < p.cfg.MetadataTTL || !ts.refreshing.CompareAndSwap(false, true) {
			return ts, nil
		}
		defer ts.refreshing.Store(false)
	}
	leaders, err := p.partitionLeaders(ctx, name)
	if err != nil {
		if ok { // keep using the old layout while metadata is unavailable
			return ts, nil
		}
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ts, ok = p.topics[name]
	if ok && len(ts.parts) >= len(leaders) {
		p.setLeadersLocked(ts.parts, leaders)
		ts.fetchedAt.Store(time.Now().UnixNano())
		return ts, nil
	}
	// New topic or added partitions: copy-on-write so callers holding the
	// old state keep a consistent view.
	nts := &topicState{name: name, parts: make([]*partQueue, len(leaders))}
	nts.fetchedAt.Store(time.Now().UnixNano())
	if ok {
		copy(nts.parts, ts.parts)
	}
	for i := range nts.parts {
		if nts.parts[i] == nil {
			nts.parts[i] = &partQueue{topic: name, partition: int32(i)}
		}
	}
	p.setLeadersLocked(nts.parts, leaders)
	p.topics[name] = nts
	return nts, nil
}

// setLeadersLocked points each partition queue at its leader's flusher,
// starting flushers for brokers seen for the first time. p.mu must be held.
func (p *Producer) setLeadersLocked(parts []*partQueue, leaders []int32) {
	for i, id := range leaders {
		bf, ok := p.flushers[id]
		if !ok {
			bf = &brokerFlusher{id: id, wake: make(chan struct{}, 1)}
			p.flushers[id] = bf
			for range p.cfg.InFlight {
				p.wg.Add(1)
				go p.flush(bf)
			}
		}
		parts[i].leader.Store(bf)
	}
}

// partitionLeaders returns the leader broker id of each partition of name,
// creating the topic first when AutoCreatePartitions allows it.
func (p *Producer) partitionLeaders(ctx context.Context, name string) ([]int32, error) {
	for attempt := 0; ; attempt++ {
		md, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{name}})
		if err != nil {
			return nil, fmt.Errorf("publish %s: metadata: %w", name, err)
		}
		p.mu.Lock()
		for _, b := range md.Brokers {
			p.brokers[int32(b.ID)] = net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
		}
		p.mu.Unlock()
		var terr error
		for _, t := range md.Topics {
			if t.Name != name {
				continue
			}
			if t.Error == nil && len(t.Partitions) > 0 {
				leaders := make([]int32, len(t.Partitions))
				for _, pt := range t.Partitions {
					if pt.ID < 0 || pt.ID >= len(leaders) {
						return nil, fmt.Errorf("publish %s: metadata lists partition %d of %d", name, pt.ID, len(leaders))
					}
					leaders[pt.ID] = int32(pt.Leader.ID)
				}
				return leaders, nil
			}
			terr = t.Error
		}
		if terr == nil {
			terr = kafka.UnknownTopicOrPartition
		}
		if attempt > 0 || p.cfg.AutoCreatePartitions <= 0 || !errors.Is(terr, kafka.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("publish %s: topic unavailable: %w", name, terr)
		}
		p.create.Lock()
		err = createTopics(ctx, p.client, []string{name}, p.cfg.AutoCreatePartitions)
		p.create.Unlock()
		if err != nil {
			return nil, fmt.Errorf("publish %s: %w", name, err)
		}
	}
}

// inflightPart is one partition's share of a produce request.
type inflightPart struct {
	q     *partQueue
	batch []queued
}

// flush is one flusher goroutine of a broker: it waits for ready
// partitions, sends all their queued messages in one request on its own
// connection, completes the callers, and repeats. It returns once Close
// asked and nothing is ready, waking a sibling to do the same.
func (p *Producer) flush(bf *brokerFlusher) {
	defer p.wg.Done()
	var (
		conn     *wireConn // nil until dialled or after a failure
		ready    []*partQueue
		parts    []inflightPart
		failures int // consecutive failed requests, for backoff
	)
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		bf.mu.Lock()
		for len(bf.ready) == 0 {
			if bf.closing {
				bf.mu.Unlock()
				select {
				case bf.wake <- struct{}{}:
				default:
				}
				return
			}
			bf.mu.Unlock()
			<-bf.wake
			bf.mu.Lock()
		}
		if bf.out > 0 {
			if wait := p.cfg.OverlapAfter - time.Since(bf.lastOut); wait > 0 {
				// The request out will likely return first, and its
				// flusher then takes this work; look again after wait.
				bf.mu.Unlock()
				time.Sleep(wait)
				continue
			}
		}
		ready, bf.ready = bf.ready, ready[:0]
		bf.out++
		bf.lastOut = time.Now()
		bf.mu.Unlock()

		parts = parts[:0]
		total := 0
		for _, q := range ready {
			q.mu.Lock()
			q.scheduled = false
			switch {
			case q.leader.Load() != bf: // leader moved: hand over
				p.scheduleLocked(q)
			case q.inflight || len(q.pending) == 0:
			case total >= p.cfg.MaxRequestBytes: // full: next request
				p.rescheduleLater(bf, q)
			default:
				batch, size := p.take(q)
				total += size
				q.inflight = true
				parts = append(parts, inflightPart{q: q, batch: batch})
			}
			q.mu.Unlock()
		}
		clear(ready)
		if len(parts) == 0 {
			bf.done()
			continue
		}

		retry := p.send(bf, &conn, parts)
		if retry {
			failures++
		} else {
			failures = 0
		}
		for i := range parts {
			q := parts[i].q
			q.mu.Lock()
			q.inflight = false
			p.scheduleLocked(q)
			q.mu.Unlock()
			parts[i] = inflightPart{}
		}
		bf.done()
		if failures > 0 {
			p.mRetries.Inc()
			select {
			case <-time.After(backoff(failures-1, 50*time.Millisecond, 2*time.Second)):
			case <-p.bgCtx.Done():
			}
		}
	}
}

// rescheduleLater puts q back on bf's ready list for the next request; q.mu
// is held and q.scheduled is false.
func (p *Producer) rescheduleLater(bf *brokerFlusher, q *partQueue) {
	q.scheduled = true
	bf.mu.Lock()
	bf.ready = append(bf.ready, q)
	bf.mu.Unlock()
}

// take removes from q what fits in one record batch. q.mu is held.
func (p *Producer) take(q *partQueue) ([]queued, int) {
	n, size := 0, 0
	for n < len(q.pending) {
		sz := len(q.pending[n].value) + len(q.pending[n].key) + 64
		if n > 0 && size+sz > p.cfg.MaxBatchBytes {
			break
		}
		size += sz
		n++
	}
	batch := make([]queued, n)
	copy(batch, q.pending[:n])
	if n == len(q.pending) {
		clear(q.pending)
		q.pending = q.pending[:0]
	} else {
		rest := make([]queued, len(q.pending)-n, cap(q.pending))
		copy(rest, q.pending[n:])
		q.pending = rest
	}
	return batch, size
}

// send produces parts in one request and completes their callers;
// messages that failed with a retryable error and have attempts left go
// back to the front of their queue. It reports whether anything is to be
// retried.
func (p *Producer) send(bf *brokerFlusher, conn **wireConn, parts []inflightPart) (retry bool) {
	slices.SortFunc(parts, func(a, b inflightPart) int { return comparePart(a, b.q.topic, b.q.partition) })
	req := make([]producePart, len(parts))
	msgs := 0
	for i, ip := range parts {
		req[i] = producePart{topic: ip.q.topic, partition: ip.q.partition, batch: ip.batch}
		msgs += len(ip.batch)
	}
	p.mBatches.Inc()
	p.mBatchLen.Observe(float64(msgs))

	rtStart := time.Now()
	res, err := p.roundTrip(bf.id, conn, req)
	p.mRequest.ObserveSince(rtStart)
	errs := make([]error, len(parts))
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		if errors.Is(err, errNoLeader) {
			p.expireMetadata()
		}
	} else {
		p.partErrors(res, parts, errs)
	}
	for i, ip := range parts {
		perr := errs[i]
		if perr == nil {
			p.mMessages.Add(uint64(len(ip.batch)))
			for j := range ip.batch {
				ip.batch[j].call.complete(nil)
			}
			continue
		}
		perr = fmt.Errorf("produce %s/%d: %w", ip.q.topic, ip.q.partition, perr)
		if retryableKafka(perr) && ip.batch[0].attempts+1 < p.cfg.MaxAttempts && p.bgCtx.Err() == nil {
			retry = true
			for j := range ip.batch {
				ip.batch[j].attempts++
			}
			q := ip.q
			q.mu.Lock()
			q.pending = append(ip.batch, q.pending...)
			q.mu.Unlock()
			continue
		}
		p.mErrors.Add(uint64(len(ip.batch)))
		for j := range ip.batch {
			ip.batch[j].call.complete(perr)
		}
	}
	return retry
}

// partErrors sets errs[i] to the broker's error for parts[i] (sorted by
// topic and partition), or to an error when the answer leaves it out.
func (p *Producer) partErrors(res *kmsg.ProduceResponse, parts []inflightPart, errs []error) {
	answered := make([]bool, len(parts))
	for _, t := range res.Topics {
		for _, rp := range t.Partitions {
			i, ok := slices.BinarySearchFunc(parts, rp.Partition, func(ip inflightPart, part int32) int {
				return comparePart(ip, t.Topic, part)
			})
			if !ok {
				continue
			}
			answered[i] = true
			if rp.ErrorCode == 0 {
				continue
			}
			errs[i] = kafka.Error(rp.ErrorCode)
			if rp.ErrorMessage != nil && *rp.ErrorMessage != "" {
				errs[i] = fmt.Errorf("%w: %s", kafka.Error(rp.ErrorCode), *rp.ErrorMessage)
			}
			if errors.Is(errs[i], kafka.NotLeaderForPartition) || errors.Is(errs[i], kafka.LeaderNotAvailable) {
				p.expireMetadata()
			}
		}
	}
	for i := range parts {
		if !answered[i] {
			errs[i] = errors.New("no answer for the partition")
		}
	}
}

// comparePart orders ip against topic and partition: the order of a
// request's parts, in which partErrors finds each answer.
func comparePart(ip inflightPart, topic string, partition int32) int {
	if c := strings.Compare(ip.q.topic, topic); c != 0 {
		return c
	}
	return int(ip.q.partition) - int(partition)
}

// errNoLeader is a partition's leader missing from the last metadata.
var errNoLeader = errors.New("no leader for the partition")

// roundTrip sends parts to broker id on *conn, dialling it first when
// needed, and waits for the answer on the calling (flusher) goroutine. A
// failed exchange closes the connection; the next request dials again.
func (p *Producer) roundTrip(id int32, conn **wireConn, parts []producePart) (*kmsg.ProduceResponse, error) {
	if *conn == nil {
		c, err := p.dial(id)
		if err != nil {
			return nil, err
		}
		*conn = c
	}
	now := time.Now()
	(*conn).nc.SetDeadline(now.Add(p.cfg.RequestTimeout + time.Second))
	res, err := (*conn).produce(parts, p.codec, p.cfg.RequestTimeout, now)
	if err != nil {
		(*conn).Close()
		*conn = nil
		return nil, fmt.Errorf("produce to broker %d: %w", id, err)
	}
	return res, nil
}

// dial connects to broker id and negotiates the produce version.
func (p *Producer) dial(id int32) (*wireConn, error) {
	p.mu.RLock()
	addr, ok := p.brokers[id]
	p.mu.RUnlock()
	if !ok {
		p.expireMetadata()
		return nil, fmt.Errorf("broker %d: %w", id, errNoLeader)
	}
	ctx, cancel := context.WithTimeout(p.bgCtx, 5*time.Second)
	defer cancel()
	c, err := dialWire(ctx, addr, p.cfg.ClientID)
	if err != nil {
		return nil, fmt.Errorf("broker %d at %s: %w", id, addr, err)
	}
	return c, nil
}

// expireMetadata makes the next Publish of every topic re-read partition
// leaders.
func (p *Producer) expireMetadata() {
	p.mu.Lock()
	for _, ts := range p.topics {
		ts.fetchedAt.Store(0)
	}
	p.mu.Unlock()
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

// retryableKafka reports errors worth sending the same batch again for:
// temporary broker errors and broken connections.
func retryableKafka(err error) bool {
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		return kerr.Temporary()
	}
	var nerr net.Error
	if errors.As(err, &nerr) {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, errNoLeader) // a broker not in the last metadata: it is re-read first
}

// Close stops accepting envelopes, waits until everything queued is acked or
// failed (each request bounded by RequestTimeout, MaxAttempts times), and
// releases connections. Publish after Close returns ErrProducerClosed.
func (p *Producer) Close() error {
	p.closeMu.Lock()
	if p.closed {
		p.closeMu.Unlock()
		return nil
	}
	p.closed = true
	p.closeMu.Unlock()

	p.mu.RLock()
	flushers := make([]*brokerFlusher, 0, len(p.flushers))
	for _, bf := range p.flushers {
		flushers = append(flushers, bf)
	}
	p.mu.RUnlock()
	for _, bf := range flushers {
		bf.mu.Lock()
		bf.closing = true
		bf.mu.Unlock()
		select {
		case bf.wake <- struct{}{}:
		default:
		}
	}
	p.wg.Wait()
	p.stop()
	// Whatever is still queued (a partition handed to a flusher that had
	// already stopped) fails rather than hanging its caller.
	p.mu.RLock()
	for _, ts := range p.topics {
		for _, q := range ts.parts {
			q.mu.Lock()
			for _, m := range q.pending {
				m.call.complete(ErrProducerClosed)
			}
			q.pending = nil
			q.mu.Unlock()
		}
	}
	p.mu.RUnlock()
	p.transport.CloseIdleConnections()
	return nil
}

// EnsureTopics creates prefix+topic for each topic that does not exist yet,
// with the given number of partitions (replication factor 1 for a single
// broker, 3 otherwise, capped by the broker count) and max.message.bytes
// of BrokerMessageMaxBytes. Existing topics are left as they are (raise
// their max.message.bytes by hand when they were created smaller).
func EnsureTopics(ctx context.Context, brokers []string, prefix string, topics []string, partitions int) error {
	if len(brokers) == 0 {
		return errors.New("ensure topics: no brokers configured")
	}
	tr := &kafka.Transport{ClientID: "sendstream-admin"}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 30 * time.Second, Transport: tr}
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = prefix + t
	}
	return createTopics(ctx, client, names, partitions)
}

// topicConfig is set on every topic createTopics creates: messages up to
// BrokerMessageMaxBytes, so any envelope under MaxEnvelopeBytes fits
// whatever the broker's default.
var topicConfig = []kafka.ConfigEntry{{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(BrokerMessageMaxBytes)}}

func createTopics(ctx context.Context, client *kafka.Client, names []string, partitions int) error {
	if partitions <= 0 {
		partitions = 1
	}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
	if err != nil {
		return fmt.Errorf("ensure topics: metadata: %w", err)
	}
	exists := map[string]bool{}
	for _, t := range md.Topics {
		if t.Error == nil && len(t.Partitions) > 0 {
			exists[t.Name] = true
		}
	}
	rf := 3
	if len(md.Brokers) < rf {
		rf = len(md.Brokers)
	}
	if rf < 1 {
		rf = 1
	}
	var req kafka.CreateTopicsRequest
	for _, n := range names {
		if !exists[n] {
			req.Topics = append(req.Topics, kafka.TopicConfig{Topic: n, NumPartitions: partitions, ReplicationFactor: rf,
				ConfigEntries: topicConfig})
		}
	}
	if len(req.Topics) == 0 {
		return nil
	}
	res, err := client.CreateTopics(ctx, &req)
	if err != nil {
		return fmt.Errorf("ensure topics: create: %w", err)
	}
	for name, terr := range res.Errors {
		if terr != nil && !errors.Is(terr, kafka.TopicAlreadyExists) {
			return fmt.Errorf("ensure topics: create %s: %w", name, terr)
		}
	}
	return nil
}
