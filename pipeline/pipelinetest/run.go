package pipelinetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/pipeline"
	"sendstream/schemas"
)

// RunStages runs the named registered stages in pipeline.Run on brokers
// (topics under prefix, res as their resources, a 100ms flush interval and
// a 50ms fetch wait) in the background. The returned stop cancels the run,
// waits for it and fails t when Run returned an error; defer it.
func RunStages(ctx context.Context, t testing.TB, brokers []string, prefix string, res pipeline.Resources, names ...string) (stop func()) {
	t.Helper()
	stages, err := pipeline.SelectStages(names...)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() {
		runErr <- pipeline.Run(runCtx, pipeline.RunConfig{Brokers: brokers, TopicPrefix: prefix, Stages: stages,
			FlushInterval: 100 * time.Millisecond, MaxWait: 50 * time.Millisecond, Resources: res})
	}()
	return func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// Copies reads topic on brokers from the start until it has seen want
// records with envelope id id (or ctx ends) and returns how many it saw.
func Copies(ctx context.Context, t testing.TB, brokers []string, topic, id string, want int) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for n < want && ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 100)
		for _, r := range fs.Records() {
			var env schemas.Envelope
			if json.Unmarshal(r.Value, &env) == nil && env.ID == id {
				n++
			}
		}
	}
	return n
}
