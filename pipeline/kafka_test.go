package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/schemas"
)

// newCluster starts an in-process Kafka-protocol broker with the given topics
// (4 partitions each) and returns its addresses; it stops with the test.
func newCluster(t testing.TB, topics ...string) []string {
	t.Helper()
	return newClusterN(t, 4, topics...)
}

// newClusterN is newCluster with parts partitions per topic.
func newClusterN(t testing.TB, parts int32, topics ...string) []string {
	t.Helper()
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(4),
		kfake.GroupMinSessionTimeout(500 * time.Millisecond),
	}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(parts, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func newTestProducer(t testing.TB, brokers []string, prefix string) *Producer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := NewProducer(ctx, ProducerConfig{Brokers: brokers, TopicPrefix: prefix, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// consumed is one record, as the tests read it.
type consumed struct {
	Topic     string
	Partition int
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []kgo.RecordHeader
}

// newReader returns a client reading topic from the start of every
// partition (no consumer group).
func newReader(t testing.TB, brokers []string, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("reader %s: %v", topic, err)
	}
	return cl
}

// readUntil appends what arrives on cl to out until done says so or ctx
// ends.
func readUntil(ctx context.Context, cl *kgo.Client, out []consumed, done func([]consumed) bool) []consumed {
	for !done(out) && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, consumed{Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset,
				Key: r.Key, Value: r.Value, Headers: r.Headers})
		})
	}
	return out
}

// consume reads n messages from topic from its start, failing the test if
// they do not arrive within timeout.
func consume(t testing.TB, brokers []string, topic string, n int, timeout time.Duration) []consumed {
	t.Helper()
	cl := newReader(t, brokers, topic)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := readUntil(ctx, cl, nil, func(m []consumed) bool { return len(m) >= n })
	if len(out) < n {
		t.Fatalf("consume %s: got %d of %d: %v", topic, len(out), n, ctx.Err())
	}
	return out[:n]
}

// consumeFor reads whatever arrives on topic during d.
func consumeFor(t testing.TB, brokers []string, topic string, d time.Duration) []consumed {
	t.Helper()
	cl := newReader(t, brokers, topic)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return readUntil(ctx, cl, nil, func([]consumed) bool { return false })
}

func decode(t testing.TB, m consumed) schemas.Envelope {
	t.Helper()
	var env schemas.Envelope
	if err := json.Unmarshal(m.Value, &env); err != nil {
		t.Fatalf("decode %s/%d@%d: %v", m.Topic, m.Partition, m.Offset, err)
	}
	return env
}

func testEnv(key string, i int) schemas.Envelope {
	return schemas.Envelope{
		ID:         fmt.Sprintf("%s-%d", key, i),
		Workspace:  "ws1",
		Type:       "test.created.v1",
		Key:        key,
		OccurredAt: time.Now().UTC().Truncate(time.Millisecond),
		Payload:    json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
	}
}
