package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// This file holds the Producer's lifecycle: the kgo client (acks=all,
// idempotence, manual flushing), its metrics hooks, topic auto-creation,
// the partitioner and Close. Publish is in publish.go, the group-commit
// flusher in groupcommit.go, the configuration in producer_config.go.

// ErrProducerClosed is returned by Publish after Close.
var ErrProducerClosed = errors.New("producer closed")

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

// partitionFor maps a key to a partition with 32-bit FNV-1a: stable across
// processes and releases.
func partitionFor(key []byte, n int) int {
	if n <= 1 {
		return 0
	}
	// FNV-1a inline: fnv.New32a's hash.Hash32 escapes, an allocation per
	// record.
	h := uint32(2166136261)
	for _, c := range key {
		h ^= uint32(c)
		h *= 16777619
	}
	return int(h % uint32(n))
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
