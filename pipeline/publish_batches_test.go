package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"sendstream/schemas"
)

// TestPublishBatchesOneCallSeveralTopics: one call publishes to two topics
// (prefix applied), returns only when both are acknowledged, and keeps each
// topic's order per key.
func TestPublishBatchesOneCallSeveralTopics(t *testing.T) {
	brokers := newCluster(t, "p.a", "p.b")
	p := newTestProducer(t, brokers, "p.")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var a, b []schemas.Envelope
	for i := range 6 {
		a = append(a, testEnv("same-key", i))
	}
	for i := range 2 {
		b = append(b, testEnv(fmt.Sprintf("b-%d", i), 100+i))
	}
	if err := p.PublishBatches(ctx, Batch{Topic: "a", Envs: a}, Batch{Topic: "b", Envs: b}); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(p.m.messages); got != 8 {
		t.Fatalf("acked = %d right after PublishBatches returned, want 8", got)
	}
	got := consume(t, brokers, "p.a", 6, 10*time.Second)
	for i, m := range got {
		if env := decode(t, m); env.ID != a[i].ID {
			t.Fatalf("p.a record %d is %s, want %s (order of the batch)", i, env.ID, a[i].ID)
		}
	}
	ids := map[string]bool{}
	for _, m := range consume(t, brokers, "p.b", 2, 10*time.Second) {
		ids[decode(t, m).ID] = true
	}
	if !ids[b[0].ID] || !ids[b[1].ID] {
		t.Fatalf("p.b holds %v, want %s and %s", ids, b[0].ID, b[1].ID)
	}
}

// TestPublishBatchesQueuesNothingWhenOneEnvelopeIsRefused: an envelope
// that cannot be sent (over MaxEnvelopeBytes) fails the call as Permanent
// before any record of any topic is queued.
func TestPublishBatchesQueuesNothingWhenOneEnvelopeIsRefused(t *testing.T) {
	brokers := newCluster(t, "a", "b")
	p := newTestProducer(t, brokers, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := testEnv("k", 2)
	big.Payload = []byte(`"` + strings.Repeat("x", p.cfg.MaxEnvelopeBytes) + `"`)
	err := p.PublishBatches(ctx, Batch{Topic: "a", Envs: []schemas.Envelope{testEnv("k", 1)}},
		Batch{Topic: "b", Envs: []schemas.Envelope{big}})
	if !IsPermanent(err) {
		t.Fatalf("PublishBatches with an oversized envelope: %v, want a Permanent error", err)
	}
	for _, topic := range []string{"a", "b"} {
		if n := endOffset(t, brokers, topic); n != 0 {
			t.Fatalf("topic %s holds %d records after the refused call, want 0", topic, n)
		}
	}
}

// TestPublishBatchesNamesTheFailingTopic: a produce error names the topic
// of the record that failed, not the others of the call.
func TestPublishBatchesNamesTheFailingTopic(t *testing.T) {
	brokers := newCluster(t, "known")
	p := newTestProducer(t, brokers, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.PublishBatches(ctx, Batch{Topic: "known", Envs: []schemas.Envelope{testEnv("k", 1)}},
		Batch{Topic: "missing", Envs: []schemas.Envelope{testEnv("k", 2)}})
	if err == nil || !strings.Contains(err.Error(), "publish missing:") {
		t.Fatalf("PublishBatches with a missing topic: %v, want an error naming it", err)
	}
}

// plainPublisher records Publish calls and fails the topics in fail.
type plainPublisher struct {
	mu    sync.Mutex
	calls map[string]int
	fail  map[string]bool
}

func (p *plainPublisher) Publish(_ context.Context, topic string, envs ...schemas.Envelope) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[topic] += len(envs)
	if p.fail[topic] {
		return errors.New("refused " + topic)
	}
	return nil
}

// TestPublishBatchesFallsBackToPublish: a Publisher without PublishBatches
// gets one Publish per batch, and the error of any of them is returned.
func TestPublishBatchesFallsBackToPublish(t *testing.T) {
	pub := &plainPublisher{calls: map[string]int{}, fail: map[string]bool{"c": true}}
	ctx := context.Background()
	one := []schemas.Envelope{testEnv("k", 1)}
	if err := PublishBatches(ctx, pub, Batch{Topic: "a", Envs: one}, Batch{Topic: "b", Envs: append(one, one...)}); err != nil {
		t.Fatal(err)
	}
	if pub.calls["a"] != 1 || pub.calls["b"] != 2 {
		t.Fatalf("calls = %v, want a:1 b:2", pub.calls)
	}
	err := PublishBatches(ctx, pub, Batch{Topic: "a", Envs: one}, Batch{Topic: "c", Envs: one})
	if err == nil || !strings.Contains(err.Error(), "refused c") {
		t.Fatalf("PublishBatches with a failing topic: %v", err)
	}
}

// endOffset is the sum of topic's partitions' end offsets.
func endOffset(t testing.TB, brokers []string, topic string) int64 {
	t.Helper()
	var offs kadm.ListedOffsets
	var err error
	withAdmin(t, brokers, func(ctx context.Context, adm *kadm.Client) { offs, err = adm.ListEndOffsets(ctx, topic) })
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// TestAddToBatchGroupsByTopic: envelopes land in their topic's batch, the
// topics in first-use order and each topic's envelopes in the order added.
func TestAddToBatchGroupsByTopic(t *testing.T) {
	var bs []Batch
	for i, topic := range []string{"a", "b", "a", "c", "b", "a"} {
		bs = AddToBatch(bs, topic, testEnv("k", i))
	}
	got := ""
	for _, b := range bs {
		got += b.Topic + ":"
		for _, e := range b.Envs {
			got += e.ID + ","
		}
		got += " "
	}
	if want := "a:k-0,k-2,k-5, b:k-1,k-4, c:k-3, "; got != want {
		t.Fatalf("batches %q, want %q", got, want)
	}
}
