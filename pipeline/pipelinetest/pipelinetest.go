// Package pipelinetest holds test helpers for stages and the pipeline: a
// lifecycle check of every registered stage, an in-process Kafka-protocol
// broker, and a Publisher that records what it is given.
package pipelinetest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"sendstream/pipeline"
	"sendstream/schemas"
)

// CheckStages builds every registered stage with r, checks its declared
// topics are pipeline topics, flushes it once when it is a Flusher (with
// nothing buffered, which must succeed) and closes it when it is a Closer.
// Import the stages (e.g. sendstream/stages/all) in the calling test.
func CheckStages(t testing.TB, r pipeline.Resources) {
	t.Helper()
	stages := pipeline.Stages()
	if len(stages) == 0 {
		t.Fatal("no stages registered: import the stage packages")
	}
	for _, reg := range stages {
		if !slices.Contains(schemas.AllTopics, reg.Consumes) {
			t.Errorf("stage %s consumes %q, not a schemas topic", reg.Name, reg.Consumes)
		}
		for _, p := range reg.Produces {
			if !slices.Contains(schemas.AllTopics, p) {
				t.Errorf("stage %s produces to %q, not a schemas topic", reg.Name, p)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		st, err := reg.Build(ctx, r)
		if err != nil || st == nil {
			cancel()
			t.Errorf("build stage %s: %v (stage %v)", reg.Name, err, st)
			continue
		}
		if f, ok := st.(pipeline.Flusher); ok {
			if err := f.Flush(ctx); err != nil {
				t.Errorf("stage %s: Flush with nothing buffered: %v", reg.Name, err)
			}
		}
		if c, ok := st.(pipeline.Closer); ok {
			if err := c.Close(); err != nil {
				t.Errorf("stage %s: Close: %v", reg.Name, err)
			}
		}
		cancel()
	}
}

// Cluster starts an in-process Kafka-protocol broker (kfake, one broker,
// topics auto-created with 4 partitions, group sessions down to 500ms) with
// prefix+topic for every schemas topic created, and returns its addresses.
// It stops when the test ends.
func Cluster(t testing.TB, prefix string) []string {
	t.Helper()
	topics := make([]string, len(schemas.AllTopics))
	for i, tp := range schemas.AllTopics {
		topics[i] = prefix + tp
	}
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(4),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(pipeline.BrokerMessageMaxBytes)}),
		kfake.GroupMinSessionTimeout(500*time.Millisecond),
		kfake.SeedTopics(4, topics...),
	)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// Publisher records published envelopes by topic; Err, when set, is
// returned instead. Safe for concurrent use.
type Publisher struct {
	mu  sync.Mutex
	byT map[string][]schemas.Envelope
	Err error
}

var _ pipeline.Publisher = (*Publisher)(nil)

// Publish records envs under topic, or returns p.Err.
func (p *Publisher) Publish(_ context.Context, topic string, envs ...schemas.Envelope) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Err != nil {
		return p.Err
	}
	if p.byT == nil {
		p.byT = map[string][]schemas.Envelope{}
	}
	p.byT[topic] = append(p.byT[topic], envs...)
	return nil
}

// Published returns a copy of what was published to topic.
func (p *Publisher) Published(topic string) []schemas.Envelope {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.byT[topic])
}

// Of returns a copy of what was published to topic for workspace ws (tests
// sharing a database may relay each other's rows).
func (p *Publisher) Of(topic, ws string) []schemas.Envelope {
	var out []schemas.Envelope
	for _, e := range p.Published(topic) {
		if e.Workspace == ws {
			out = append(out, e)
		}
	}
	return out
}
