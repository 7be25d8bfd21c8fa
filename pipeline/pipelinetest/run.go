package pipelinetest

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/pipeline"
	"sendstream/schemas"
)

// Start runs pipeline.Run with cfg in the background until ctx ends or
// stop is called, with a registry of its own and an error-level logger on
// stderr when cfg names none. The returned stop (also run when the test
// ends; only the first call acts) cancels the run and waits up to 40 s for
// it, failing t, with what in the message, when Run returned an error
// other than context.Canceled or did not stop.
func Start(ctx context.Context, t testing.TB, what string, cfg pipeline.RunConfig) (stop func()) {
	t.Helper()
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pipeline.Run(ctx, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("%s: %v", what, err)
				}
			case <-time.After(40 * time.Second):
				t.Errorf("%s did not stop", what)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// Producer returns a producer to brokers, topics under prefix, closed
// when the test ends; a failure fails t.
func Producer(ctx context.Context, t testing.TB, brokers []string, prefix string) *pipeline.Producer {
	t.Helper()
	prod, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: brokers, TopicPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := prod.Close(); err != nil {
			t.Errorf("close producer: %v", err)
		}
	})
	return prod
}

// RunStages starts (see Start) the named registered stages under ctx on
// brokers, topics under prefix, with res as their resources, a 100ms flush
// interval and a 50ms fetch wait. Defer the returned stop so that the run
// ends before what res holds is closed.
func RunStages(ctx context.Context, t testing.TB, brokers []string, prefix string, res pipeline.Resources, names ...string) (stop func()) {
	t.Helper()
	stages, err := pipeline.SelectStages(names...)
	if err != nil {
		t.Fatal(err)
	}
	return Start(ctx, t, "Run", pipeline.RunConfig{Brokers: brokers, TopicPrefix: prefix, Stages: stages,
		FlushInterval: 100 * time.Millisecond, MaxWait: 50 * time.Millisecond, Resources: res})
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
