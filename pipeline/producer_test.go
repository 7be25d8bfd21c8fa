package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sendstream/schemas"
)

func TestPublishGroupCommit64Callers(t *testing.T) {
	const topic = "t.events"
	brokers := newCluster(t, "pfx."+topic)
	p := newTestProducer(t, brokers, "pfx.")

	const callers, perCaller = 64, 50
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < perCaller; i++ {
				if err := p.Publish(ctx, topic, testEnv(fmt.Sprintf("k%d", c), i)); err != nil {
					errs <- err
					return
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Publish: %v", err)
	}
	total := callers * perCaller
	if got := counterValue(p.m.messages); got != uint64(total) {
		t.Fatalf("acked messages = %d, want %d", got, total)
	}
	// Group commit: with 64 callers in flight, requests carry several
	// messages each, so there are clearly fewer requests than messages.
	if b := counterValue(p.m.batches); b >= uint64(total) {
		t.Fatalf("batches = %d for %d messages: no group commit", b, total)
	}
	t.Logf("%d messages in %d produce requests", total, counterValue(p.m.batches))

	msgs := consume(t, brokers, "pfx."+topic, total, 20*time.Second)
	seen := map[string]bool{}
	partOfKey := map[string]int{}
	lastIdx := map[string]int{}
	for _, m := range msgs {
		env := decode(t, m)
		if seen[env.ID] {
			t.Fatalf("duplicate %s", env.ID)
		}
		seen[env.ID] = true
		if string(m.Key) != env.Key {
			t.Fatalf("record key %q, envelope key %q", m.Key, env.Key)
		}
		if pt, ok := partOfKey[env.Key]; ok && pt != m.Partition {
			t.Fatalf("key %s on partitions %d and %d", env.Key, pt, m.Partition)
		}
		partOfKey[env.Key] = m.Partition
		if want := partitionFor([]byte(env.Key), 4); m.Partition != want {
			t.Fatalf("key %s on partition %d, want %d", env.Key, m.Partition, want)
		}
		// Order per key is the order of the caller's sequential Publishes.
		var i int
		fmt.Sscanf(env.ID[strings.LastIndexByte(env.ID, '-')+1:], "%d", &i)
		if prev, ok := lastIdx[env.Key]; ok && i != prev+1 {
			t.Fatalf("key %s: %d after %d", env.Key, i, prev)
		}
		lastIdx[env.Key] = i
		if len(m.Headers) == 0 || m.Headers[0].Key != "type" || string(m.Headers[0].Value) != env.Type {
			t.Fatalf("type header = %+v", m.Headers)
		}
	}
}

func TestPublishManyTopicsWaitsForAll(t *testing.T) {
	brokers := newCluster(t, "a", "b")
	p := newTestProducer(t, brokers, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var envs []schemas.Envelope
	for i := 0; i < 20; i++ {
		envs = append(envs, testEnv(fmt.Sprintf("key-%d", i), i))
	}
	if err := p.Publish(ctx, "a", envs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, "b", envs[:3]...); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(p.m.messages); got != 23 {
		t.Fatalf("acked = %d right after Publish returned, want 23", got)
	}
	if n := len(consume(t, brokers, "a", 20, 10*time.Second)); n != 20 {
		t.Fatalf("a: %d", n)
	}
}

func TestPublishUnknownTopicFails(t *testing.T) {
	brokers := newCluster(t, "known")
	p := newTestProducer(t, brokers, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.Publish(ctx, "missing", testEnv("k", 1))
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Publish to a missing topic: %v", err)
	}
}

func TestPublishAutoCreate(t *testing.T) {
	brokers := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := NewProducer(ctx, ProducerConfig{Brokers: brokers, AutoCreatePartitions: 3, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Publish(ctx, "fresh", testEnv("k", 1)); err != nil {
		t.Fatalf("Publish with auto-create: %v", err)
	}
	if n := partitionCount(t, brokers, "fresh"); n != 3 {
		t.Fatalf("partitions = %d, want 3", n)
	}
}

func TestEnsureTopics(t *testing.T) {
	brokers := newCluster(t, "x.existing")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := EnsureTopics(ctx, brokers, "x.", []string{"existing", "new1", "new2"}, 6); err != nil {
		t.Fatal(err)
	}
	// Idempotent.
	if err := EnsureTopics(ctx, brokers, "x.", []string{"existing", "new1", "new2"}, 6); err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int{"existing": 4, "new1": 6, "new2": 6} {
		if n := partitionCount(t, brokers, "x."+topic); n != want {
			t.Fatalf("%s: %d partitions, want %d", topic, n, want)
		}
	}
	// The producer's own admin path creates with its client.
	p := newTestProducer(t, brokers, "x.")
	if err := p.EnsureTopics(ctx, []string{"existing", "new3"}, 2); err != nil {
		t.Fatal(err)
	}
	if n := partitionCount(t, brokers, "x.new3"); n != 2 {
		t.Fatalf("new3: %d partitions, want 2", n)
	}
	cfg := topicConfigOf(t, brokers, "x.new3", "max.message.bytes")
	if cfg != strconv.Itoa(BrokerMessageMaxBytes) {
		t.Fatalf("max.message.bytes = %q, want %d", cfg, BrokerMessageMaxBytes)
	}
}

// withAdmin calls fn with an admin client of brokers and a 10 s context.
func withAdmin(t testing.TB, brokers []string, fn func(ctx context.Context, adm *kadm.Client)) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fn(ctx, kadm.NewClient(cl))
}

// partitionCount returns the number of partitions of topic, 0 when it
// does not exist.
func partitionCount(t testing.TB, brokers []string, topic string) int {
	t.Helper()
	var md kadm.Metadata
	var err error
	withAdmin(t, brokers, func(ctx context.Context, adm *kadm.Client) { md, err = adm.Metadata(ctx, topic) })
	if err != nil {
		t.Fatal(err)
	}
	if td, ok := md.Topics[topic]; ok && td.Err == nil {
		return len(td.Partitions)
	}
	return 0
}

// topicConfigOf returns the value of one config of topic.
func topicConfigOf(t testing.TB, brokers []string, topic, name string) string {
	t.Helper()
	var rcs kadm.ResourceConfigs
	var err error
	withAdmin(t, brokers, func(ctx context.Context, adm *kadm.Client) { rcs, err = adm.DescribeTopicConfigs(ctx, topic) })
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == name && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

func TestCloseDrainsAndRejects(t *testing.T) {
	brokers := newCluster(t, "d")
	p := newTestProducer(t, brokers, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var failed, ok sync.Map
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := p.Publish(ctx, "d", testEnv(fmt.Sprintf("k%d", i), i)); err != nil {
				if !errors.Is(err, ErrProducerClosed) {
					t.Errorf("Publish during Close: %v", err)
				}
				failed.Store(i, true)
			} else {
				ok.Store(i, true)
			}
		}(i)
	}
	time.Sleep(time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := p.Publish(ctx, "d", testEnv("k", 1)); !errors.Is(err, ErrProducerClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
	// Every Publish that returned nil is in the topic.
	n := 0
	ok.Range(func(_, _ any) bool { n++; return true })
	got := consumeFor(t, brokers, "d", 2*time.Second)
	if len(got) < n {
		t.Fatalf("%d acked but %d in topic", n, len(got))
	}
}

func TestPublishCtxCancelled(t *testing.T) {
	brokers := newCluster(t, "c")
	p := newTestProducer(t, brokers, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// The topic lookup may already fail on the cancelled context, or the
	// wait does; either way the error reports the cancellation.
	if err := p.Publish(ctx, "c", testEnv("k", 1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish with a cancelled ctx: %v", err)
	}
}

// TestPublishWhileMetadataRefreshes publishes from many goroutines while
// every call finds the partition layout stale (the race detector checks
// that refreshing and reading the layout's age do not race).
func TestPublishWhileMetadataRefreshes(t *testing.T) {
	const topic = "t.refresh"
	brokers := newCluster(t, "pfx."+topic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := NewProducer(ctx, ProducerConfig{Brokers: brokers, TopicPrefix: "pfx.", Metrics: prometheus.NewRegistry(), MetadataTTL: time.Nanosecond})
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if err := p.Publish(ctx, topic, testEnv(fmt.Sprintf("k%d", c), i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Publish: %v", err)
	}
	if got := counterValue(p.m.messages); got != 160 {
		t.Fatalf("acked messages = %d, want 160", got)
	}
}

// TestSlowRequestHoldsTheConnection pins what kgo does with a slow
// broker: a broker answers one connection's requests in order, and kgo
// produces over one connection per broker, so while one produce request is
// held a message for another partition of the same broker is sent
// (pipelined, idempotence allows five requests in flight) but acked only
// after the held one; nothing fails and nothing is reordered. (The hand-
// written producer used one connection per request in flight, so there the
// second message was acked first.)
func TestSlowRequestHoldsTheConnection(t *testing.T) {
	const topic = "t.slow"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			for _, p := range tp.Partitions {
				if p.Partition == int32(partitionFor([]byte("slow"), 4)) {
					once.Do(func() {
						close(held)
						c.SleepControl(func() { <-release })
					})
				}
			}
		}
		return nil, nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := NewProducer(ctx, ProducerConfig{Brokers: c.ListenAddrs(), Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fast := "fast"
	for i := 0; partitionFor([]byte(fast), 4) == partitionFor([]byte("slow"), 4); i++ {
		fast = fmt.Sprintf("fast%d", i)
	}
	slowDone := make(chan error, 1)
	go func() { slowDone <- p.Publish(ctx, topic, testEnv("slow", 0)) }()
	<-held
	fastDone := make(chan error, 1)
	go func() { fastDone <- p.Publish(ctx, topic, testEnv(fast, 0)) }()
	select {
	case err := <-fastDone:
		t.Fatalf("acked while the request before it on the connection was held: %v", err)
	case err := <-slowDone:
		t.Fatalf("the held request was answered before its release: %v", err)
	case <-time.After(time.Second):
	}
	close(release)
	for name, ch := range map[string]chan error{"slow": slowDone, "fast": fastDone} {
		if err := <-ch; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
