package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"sendstream/schemas"
)

// ErrProducerClosed is returned by Publish after Close.
var ErrProducerClosed = errors.New("producer closed")

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
	// MaxBatchBytes caps the encoded envelopes in one produce request
	// (default 900 KiB, under the broker's default message.max.bytes).
	MaxBatchBytes int
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

// Producer publishes envelopes with acks=all using group commit: messages are
// queued per topic partition, and one flusher goroutine per partition sends
// everything queued as one produce request as soon as the previous request
// to that partition returned. Each Publish waits for the acknowledgement of
// its own messages. A Producer is safe for concurrent use; create one per
// process and Close it last.
type Producer struct {
	cfg         ProducerConfig
	compression kafka.Compression
	client      *kafka.Client
	transport   *kafka.Transport

	mu     sync.RWMutex
	topics map[string]*topicState // by full (prefixed) topic name
	closed bool

	stop   context.CancelFunc // cancels the flushers' context after drain
	bgCtx  context.Context
	wg     sync.WaitGroup
	create sync.Mutex // serialises auto-creation

	mBatches  *Counter
	mMessages *Counter
	mErrors   *Counter
	mRetries  *Counter
	mAck      *Histogram
	mBatchLen *Histogram
}

var _ Publisher = (*Producer)(nil)

type topicState struct {
	name      string
	fetchedAt time.Time
	parts     []*partQueue
}

// partQueue is the queue of one topic partition and its flusher.
type partQueue struct {
	topic     string
	partition int

	mu      sync.Mutex
	pending []queued
	bytes   int
	wake    chan struct{} // capacity 1
	closing bool
}

type queued struct {
	key, value []byte
	typ        string
	call       *call
}

// call tracks one Publish: it completes when every message is acked or one
// failed.
type call struct {
	remaining atomic.Int32
	errOnce   sync.Once
	err       error
	done      chan struct{}
}

func (c *call) complete(err error) {
	if err != nil {
		c.errOnce.Do(func() { c.err = err })
	}
	if c.remaining.Add(-1) == 0 {
		close(c.done)
	}
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
	p := &Producer{
		cfg:         cfg,
		compression: comp,
		transport:   tr,
		client:      &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: cfg.RequestTimeout, Transport: tr},
		topics:      map[string]*topicState{},
		bgCtx:       bg,
		stop:        stop,
	}
	m := cfg.Metrics
	m.Help("sendstream_producer_batches_total", "Produce requests sent (group commits).")
	m.Help("sendstream_producer_messages_total", "Envelopes acknowledged by the broker.")
	m.Help("sendstream_producer_errors_total", "Envelopes whose produce failed.")
	m.Help("sendstream_producer_ack_seconds", "Time from Publish to the broker's acknowledgement.")
	p.mBatches = m.Counter("sendstream_producer_batches_total")
	p.mMessages = m.Counter("sendstream_producer_messages_total")
	p.mErrors = m.Counter("sendstream_producer_errors_total")
	p.mRetries = m.Counter("sendstream_producer_retries_total")
	p.mAck = m.Histogram("sendstream_producer_ack_seconds", nil)
	p.mBatchLen = m.Histogram("sendstream_producer_batch_messages", []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096})

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
// key is empty). It returns nil once every envelope is acknowledged, the
// first produce error (wrapped) otherwise, or ctx's error when ctx ends first
// (the envelopes may still be written then). Safe for concurrent use.
func (p *Producer) Publish(ctx context.Context, topic string, envs ...schemas.Envelope) error {
	if len(envs) == 0 {
		return nil
	}
	start := time.Now()
	ts, err := p.topic(ctx, p.cfg.TopicPrefix+topic)
	if err != nil {
		return err
	}
	c := &call{done: make(chan struct{})}
	c.remaining.Store(int32(len(envs)))
	msgs := make([]queued, len(envs))
	for i := range envs {
		v, err := json.Marshal(&envs[i])
		if err != nil {
			return Permanent(fmt.Errorf("publish %s: encode envelope %s: %w", ts.name, envs[i].ID, err))
		}
		if len(v) > p.cfg.MaxBatchBytes {
			return Permanent(fmt.Errorf("publish %s: envelope %s is %d bytes, over the %d limit", ts.name, envs[i].ID, len(v), p.cfg.MaxBatchBytes))
		}
		key := envs[i].Key
		if key == "" {
			key = envs[i].ID
		}
		msgs[i] = queued{key: []byte(key), value: v, typ: envs[i].Type, call: c}
	}
	for i := range msgs {
		q := ts.parts[partitionFor(msgs[i].key, len(ts.parts))]
		if !q.enqueue(msgs[i]) {
			// Closed while enqueuing: fail the remaining messages of this call.
			for j := i; j < len(msgs); j++ {
				c.complete(ErrProducerClosed)
			}
			break
		}
	}
	select {
	case <-c.done:
		if c.err != nil {
			return fmt.Errorf("publish %s: %w", ts.name, c.err)
		}
		p.mAck.ObserveSince(start)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("publish %s: waiting for ack: %w", ts.name, ctx.Err())
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

func (q *partQueue) enqueue(m queued) bool {
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return false
	}
	q.pending = append(q.pending, m)
	q.bytes += len(m.value) + len(m.key)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// topic returns the cached partition layout of a topic, refreshing it when
// older than MetadataTTL.
func (p *Producer) topic(ctx context.Context, name string) (*topicState, error) {
	p.mu.RLock()
	ts, ok := p.topics[name]
	closed := p.closed
	p.mu.RUnlock()
	if closed {
		return nil, ErrProducerClosed
	}
	if ok && time.Since(ts.fetchedAt) < p.cfg.MetadataTTL {
		return ts, nil
	}
	n, err := p.partitionCount(ctx, name)
	if err != nil {
		if ok { // keep using the old layout while metadata is unavailable
			return ts, nil
		}
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrProducerClosed
	}
	ts, ok = p.topics[name]
	if ok && len(ts.parts) >= n {
		ts.fetchedAt = time.Now()
		return ts, nil
	}
	// New topic or added partitions: copy-on-write so readers holding the
	// old state keep a consistent view.
	nts := &topicState{name: name, fetchedAt: time.Now(), parts: make([]*partQueue, n)}
	if ok {
		copy(nts.parts, ts.parts)
	}
	for i := range nts.parts {
		if nts.parts[i] == nil {
			q := &partQueue{topic: name, partition: i, wake: make(chan struct{}, 1)}
			nts.parts[i] = q
			p.wg.Add(1)
			go p.flusher(q)
		}
	}
	p.topics[name] = nts
	return nts, nil
}

func (p *Producer) partitionCount(ctx context.Context, name string) (int, error) {
	for attempt := 0; ; attempt++ {
		md, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{name}})
		if err != nil {
			return 0, fmt.Errorf("publish %s: metadata: %w", name, err)
		}
		var terr error
		for _, t := range md.Topics {
			if t.Name != name {
				continue
			}
			if t.Error == nil && len(t.Partitions) > 0 {
				return len(t.Partitions), nil
			}
			terr = t.Error
		}
		if terr == nil {
			terr = kafka.UnknownTopicOrPartition
		}
		if attempt > 0 || p.cfg.AutoCreatePartitions <= 0 || !errors.Is(terr, kafka.UnknownTopicOrPartition) {
			return 0, fmt.Errorf("publish %s: topic unavailable: %w", name, terr)
		}
		p.create.Lock()
		err = createTopics(ctx, p.client, []string{name}, p.cfg.AutoCreatePartitions)
		p.create.Unlock()
		if err != nil {
			return 0, fmt.Errorf("publish %s: %w", name, err)
		}
	}
}

// flusher sends everything queued on q, one produce request at a time, until
// the producer closes and q is empty.
func (p *Producer) flusher(q *partQueue) {
	defer p.wg.Done()
	var batch []queued
	for {
		q.mu.Lock()
		for len(q.pending) == 0 {
			if q.closing {
				q.mu.Unlock()
				return
			}
			q.mu.Unlock()
			<-q.wake
			q.mu.Lock()
		}
		// Take as much as fits in one request; leave the rest for the next.
		n, size := 0, 0
		for n < len(q.pending) {
			sz := len(q.pending[n].value) + len(q.pending[n].key)
			if n > 0 && size+sz > p.cfg.MaxBatchBytes {
				break
			}
			size += sz
			n++
		}
		batch = append(batch[:0], q.pending[:n]...)
		if n == len(q.pending) {
			clear(q.pending) // drop references for the GC
			q.pending = q.pending[:0]
			q.bytes = 0
		} else {
			rest := make([]queued, len(q.pending)-n, cap(q.pending))
			copy(rest, q.pending[n:])
			q.pending = rest
			q.bytes -= size
		}
		q.mu.Unlock()

		err := p.produce(q, batch)
		p.mBatches.Inc()
		p.mBatchLen.Observe(float64(len(batch)))
		if err != nil {
			p.mErrors.Add(uint64(len(batch)))
		} else {
			p.mMessages.Add(uint64(len(batch)))
		}
		for i := range batch {
			batch[i].call.complete(err)
		}
		clear(batch)
	}
}

// produce sends one batch with acks=all, retrying retryable failures.
func (p *Producer) produce(q *partQueue, batch []queued) error {
	now := time.Now()
	var err error
	for attempt := 0; attempt < p.cfg.MaxAttempts; attempt++ {
		if attempt > 0 {
			p.mRetries.Inc()
			select {
			case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
			case <-p.bgCtx.Done():
				return fmt.Errorf("produce %s/%d: %w", q.topic, q.partition, ErrProducerClosed)
			}
		}
		recs := make([]kafka.Record, len(batch))
		for i := range batch {
			recs[i] = kafka.Record{
				Time:    now,
				Key:     kafka.NewBytes(batch[i].key),
				Value:   kafka.NewBytes(batch[i].value),
				Headers: []kafka.Header{{Key: "type", Value: []byte(batch[i].typ)}},
			}
		}
		var res *kafka.ProduceResponse
		res, err = p.client.Produce(p.bgCtx, &kafka.ProduceRequest{
			Topic:        q.topic,
			Partition:    q.partition,
			RequiredAcks: kafka.RequireAll,
			Records:      kafka.NewRecordReader(recs...),
			Compression:  p.compression,
		})
		if err == nil && res != nil && res.Error != nil {
			err = res.Error
		}
		if err == nil {
			return nil
		}
		err = fmt.Errorf("produce %s/%d: %w", q.topic, q.partition, err)
		if !retryableKafka(err) {
			return err
		}
	}
	return err
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
	return errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "EOF") ||
		strings.Contains(err.Error(), "connection reset")
}

// Close stops accepting envelopes, waits until everything queued is acked or
// failed (bounded by ctx-less RequestTimeout × MaxAttempts per batch), and
// releases connections. Publish after Close returns ErrProducerClosed.
func (p *Producer) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	topics := p.topics
	p.mu.Unlock()
	for _, ts := range topics {
		for _, q := range ts.parts {
			q.mu.Lock()
			q.closing = true
			q.mu.Unlock()
			select {
			case q.wake <- struct{}{}:
			default:
			}
		}
	}
	p.wg.Wait()
	p.stop()
	p.transport.CloseIdleConnections()
	return nil
}

// EnsureTopics creates prefix+topic for each topic that does not exist yet,
// with the given number of partitions (replication factor 1 for a single
// broker, 3 otherwise, capped by the broker count). Existing topics are left
// as they are.
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
			req.Topics = append(req.Topics, kafka.TopicConfig{Topic: n, NumPartitions: partitions, ReplicationFactor: rf})
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
