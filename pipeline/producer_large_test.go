package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/schemas"
)

// TestPublishLargeEnvelope: an envelope far over a broker's default
// message.max.bytes (1 MB) is published when the producer creates its topic
// (max.message.bytes of BrokerMessageMaxBytes), and reads back whole; one
// over MaxEnvelopeBytes is refused as Permanent before anything is sent.
func TestPublishLargeEnvelope(t *testing.T) {
	brokers := newCluster(t) // broker defaults; the producer creates the topic
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := NewProducer(ctx, ProducerConfig{Brokers: brokers, AutoCreatePartitions: 2, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })

	big := testEnv("k", 1)
	big.Payload = json.RawMessage(`{"s":"` + strings.Repeat("x", 20<<20) + `"}`)
	if err := p.Publish(ctx, "large", big, testEnv("k", 2)); err != nil {
		t.Fatalf("publish a 20 MB envelope: %v", err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("large"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []schemas.Envelope
	for len(got) < 2 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 && ctx.Err() == nil {
			t.Fatalf("fetch: %v", errs)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var env schemas.Envelope
			if err := json.Unmarshal(r.Value, &env); err != nil {
				t.Fatal(err)
			}
			got = append(got, env)
		})
	}
	if len(got) != 2 || got[0].ID != big.ID || len(got[0].Payload) != len(big.Payload) || got[1].ID != "k-2" {
		t.Fatalf("read back %d envelopes", len(got))
	}

	small, err := NewProducer(ctx, ProducerConfig{Brokers: brokers, MaxEnvelopeBytes: 1 << 20, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = small.Close() })
	err = small.Publish(ctx, "large", big)
	if !IsPermanent(err) {
		t.Fatalf("an envelope over MaxEnvelopeBytes: %v, want a Permanent error", err)
	}
}
