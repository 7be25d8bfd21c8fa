package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

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
	p, err := NewProducer(ctx, ProducerConfig{Brokers: brokers, TopicPrefix: prefix, Metrics: NewRegistry()})
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

var groupSeq atomic.Int64

// consume reads n messages from topic with a fresh consumer group, failing
// the test if they do not arrive within timeout.
func consume(t testing.TB, brokers []string, topic string, n int, timeout time.Duration) []kafka.Message {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           brokers,
		GroupID:           fmt.Sprintf("test-reader-%d-%d", time.Now().UnixNano(), groupSeq.Add(1)),
		Topic:             topic,
		StartOffset:       kafka.FirstOffset,
		MaxWait:           100 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond,
		SessionTimeout:    time.Second,
		RebalanceTimeout:  time.Second,
		ReadLagInterval:   -1,
	})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []kafka.Message
	for len(out) < n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("consume %s: got %d of %d: %v", topic, len(out), n, err)
		}
		out = append(out, m)
	}
	return out
}

// consumeFor reads whatever arrives on topic during d.
func consumeFor(t testing.TB, brokers []string, topic string, d time.Duration) []kafka.Message {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           brokers,
		GroupID:           fmt.Sprintf("test-reader-%d-%d", time.Now().UnixNano(), groupSeq.Add(1)),
		Topic:             topic,
		StartOffset:       kafka.FirstOffset,
		MaxWait:           100 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond,
		SessionTimeout:    time.Second,
		RebalanceTimeout:  time.Second,
		ReadLagInterval:   -1,
	})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out []kafka.Message
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return out
		}
		out = append(out, m)
	}
}

func decode(t testing.TB, m kafka.Message) schemas.Envelope {
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
