package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sendstream/pipeline"
	"sendstream/schemas"
)

// Helpers of the keyed-concurrency tests: a broker, a producer and a
// Publisher that speak to it with franz-go directly, and a reader of a
// group's committed offsets.

const keyedParts = 4

// keyedCluster starts an in-process Kafka-protocol broker with prefix+topic
// for each topic (keyedParts partitions) and returns its addresses.
func keyedCluster(t testing.TB, prefix string, topics ...string) []string {
	t.Helper()
	full := make([]string, len(topics))
	for i, tp := range topics {
		full[i] = prefix + tp
	}
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.GroupMinSessionTimeout(500*time.Millisecond),
		kfake.SeedTopics(keyedParts, full...),
	)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// kgoClient returns a plain client of brokers, closed with the test.
func kgoClient(t testing.TB, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produced says where an envelope landed.
type produced struct {
	partition int32
	offset    int64
}

// produceEnvs publishes envs to topic, keyed by env.Key with a "type"
// header, and returns where each landed by id.
func produceEnvs(t testing.TB, cl *kgo.Client, topic string, envs []schemas.Envelope) map[string]produced {
	t.Helper()
	recs := make([]*kgo.Record, len(envs))
	for i, env := range envs {
		v, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(env.Key), Value: v,
			Headers: []kgo.RecordHeader{{Key: "type", Value: []byte(env.Type)}}} // as Producer.Publish sets it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// ProduceSync answers in the order the records were acknowledged.
	idOf := make(map[*kgo.Record]string, len(envs))
	for i, r := range recs {
		idOf[r] = envs[i].ID
	}
	at := make(map[string]produced, len(envs))
	for _, r := range res {
		at[idOf[r.Record]] = produced{r.Record.Partition, r.Record.Offset}
	}
	return at
}

// keyedEnv is envelope number i of key.
func keyedEnv(key string, i int) schemas.Envelope {
	return schemas.Envelope{
		ID: fmt.Sprintf("%s-%d", key, i), Workspace: "ws1", Type: "test.created.v1", Key: key,
		OccurredAt: time.Now().UTC().Truncate(time.Millisecond),
		Payload:    json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
	}
}

// committedOffsets returns the group's committed offset per partition of
// topic (-1 when none), read from the broker.
func committedOffsets(t testing.TB, cl *kgo.Client, group, topic string) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range int32(keyedParts) {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	out := map[int32]int64{}
	if err := kerr.ErrorForCode(res.ErrorCode); errors.Is(err, kerr.GroupIDNotFound) {
		return out // the group has not joined yet: nothing committed
	} else if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	for _, tp := range res.Topics {
		for _, p := range tp.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("offset fetch partition %d: %v", p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// recPublisher records what the runner publishes, by topic and id.
type recPublisher struct {
	mu  sync.Mutex
	ids map[string]int // times each id was published
}

func (p *recPublisher) Publish(_ context.Context, topic string, envs ...schemas.Envelope) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ids == nil {
		p.ids = map[string]int{}
	}
	for _, e := range envs {
		p.ids[topic+"/"+e.ID]++
	}
	return nil
}

func (p *recPublisher) has(topic, id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ids[topic+"/"+id] > 0
}

// keyedRunConfig is a RunConfig with test-sized timings.
func keyedRunConfig(brokers []string, prefix string, p pipeline.Publisher, stages ...pipeline.Registered) pipeline.RunConfig {
	return pipeline.RunConfig{
		Brokers: brokers, TopicPrefix: prefix, Stages: stages,
		Resources:  pipeline.Resources{Publisher: p},
		MaxRetries: 2, BackoffBase: time.Millisecond, BackoffMax: 20 * time.Millisecond,
		FlushInterval: 100 * time.Millisecond, DrainTimeout: 5 * time.Second,
		MaxWait: 100 * time.Millisecond, SessionTimeout: 2 * time.Second, RebalanceTimeout: 2 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond, JoinGroupBackoff: 100 * time.Millisecond,
		Metrics: prometheus.NewRegistry(),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// poll calls cond every 20ms until it is true or d passed.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
