package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/schemas"
)

// benchEnv is an envelope whose JSON encoding is about 200 bytes.
func benchEnv(i int) schemas.Envelope {
	return schemas.Envelope{
		ID:         "0190f5a8c2d34e5f8a9b0c1d2e3f4a5b",
		Workspace:  "ws_bench",
		Type:       "event.recorded.v1",
		Key:        fmt.Sprintf("ws_bench/c%d", i%1000),
		OccurredAt: time.Unix(1700000000, 0).UTC(),
		Payload:    json.RawMessage(`{"name":"signup","value":` + strings.Repeat("1", 20) + `}`),
	}
}

// run64 spreads b.N operations over 64 goroutines and reports msg/s.
func run64(b *testing.B, op func(i int) error) {
	const callers = 64
	var wg sync.WaitGroup
	var once sync.Once
	per := b.N / callers
	rem := b.N % callers
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for c := 0; c < callers; c++ {
		n := per
		if c < rem {
			n++
		}
		wg.Add(1)
		go func(c, n int) {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if err := op(c*1_000_003 + i); err != nil {
					once.Do(func() { b.Error(err) })
					return
				}
			}
		}(c, n)
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
}

// BenchmarkPublish64: 64 concurrent callers × 1 envelope per Publish,
// acks=all, against an in-process kfake with 4 partitions. Compare with
// BenchmarkKgo64 (the bare client) from the same run.
func BenchmarkPublish64(b *testing.B) {
	for _, tc := range []struct {
		comp  string
		parts int32
	}{{"none", 4}, {"snappy", 4}, {"none", 1}, {"none", 8}} {
		b.Run(fmt.Sprintf("%s/p%d", tc.comp, tc.parts), func(b *testing.B) {
			comp := tc.comp
			brokers := newClusterN(b, tc.parts, "bench")
			ctx := context.Background()
			p, err := NewProducer(ctx, ProducerConfig{Brokers: brokers, Compression: comp, Metrics: prometheus.NewRegistry()})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			v, _ := json.Marshal(benchEnv(0))
			b.SetBytes(int64(len(v)))
			if err := p.Publish(ctx, "bench", benchEnv(0)); err != nil {
				b.Fatal(err)
			}
			run64(b, func(i int) error { return p.Publish(ctx, "bench", benchEnv(i)) })
			b.ReportMetric(float64(counterValue(p.m.messages))/float64(max(counterValue(p.m.batches), 1)), "msg/batch")
		})
	}
}

// frozenEnv is the record value of BenchmarkKgo64: an envelope shaped as
// schemas.Envelope, encoded by encoding/json, so no code of ours is in the
// baseline.
type frozenEnv struct {
	ID         string          `json:"id"`
	Workspace  string          `json:"workspace"`
	Type       string          `json:"type"`
	Key        string          `json:"key"`
	OccurredAt time.Time       `json:"occurredAt"`
	Attempt    int             `json:"attempt"`
	Payload    json.RawMessage `json:"payload"`
}

// BenchmarkKgo64 is BenchmarkPublish64's frozen baseline, from the same
// run: franz-go's kgo, the client Producer wraps, with fixed options
// (acks=all, idempotent, no compression, manual flushing) and a bare group
// commit (one flusher, the next flush as soon as the last returns), 64
// callers × 1 record per call. It shares no code with Producer, so the
// ratio is the cost or gain of what Producer adds (envelope encoding, its
// batching rules, metrics). It replaced kafka-go's Writer, kept only as
// PERFORMANCE.md's historical figure: one Kafka client in go.mod.
func BenchmarkKgo64(b *testing.B) {
	brokers := newCluster(b, "bench")
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ManualFlushing(), kgo.MaxBufferedRecords(1024),
		kgo.DefaultProduceTopic("bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	flushCtx, stop := context.WithCancel(ctx)
	kick, flushed := make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(flushed)
		for {
			select {
			case <-flushCtx.Done():
				return
			case <-kick:
			}
			_ = cl.Flush(flushCtx)
		}
	}()
	defer func() { stop(); <-flushed }()
	frozen := func(i int) frozenEnv {
		return frozenEnv{ID: "0190f5a8c2d34e5f8a9b0c1d2e3f4a5b", Workspace: "ws_bench", Type: "event.recorded.v1",
			Key: "ws_bench/c" + strconv.Itoa(i%1000), OccurredAt: time.Unix(1700000000, 0).UTC(),
			Payload: json.RawMessage(`{"name":"signup","value":` + strings.Repeat("1", 20) + `}`)}
	}
	v, _ := json.Marshal(frozen(0))
	b.SetBytes(int64(len(v)))
	run64(b, func(i int) error {
		env := frozen(i)
		v, err := json.Marshal(&env)
		if err != nil {
			return err
		}
		done := make(chan error, 1)
		cl.Produce(ctx, &kgo.Record{Key: []byte(env.Key), Value: v}, func(_ *kgo.Record, err error) { done <- err })
		select {
		case kick <- struct{}{}:
		default:
		}
		return <-done
	})
}

// BenchmarkPublishAtRate publishes one envelope every 500 µs (2,000/s, each
// Publish on its own goroutine, timed from its intended start) for b.N
// envelopes and reports the ack latency's median and 99th percentile.
func BenchmarkPublishAtRate(b *testing.B) {
	const topic = "t.rate"
	brokers := newCluster(b, topic)
	ctx := context.Background()
	p, err := NewProducer(ctx, ProducerConfig{Brokers: brokers, Metrics: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if err := p.Publish(ctx, topic, benchEnv(0)); err != nil { // metadata, connections
		b.Fatal(err)
	}
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		due := start.Add(time.Duration(i) * 500 * time.Microsecond)
		time.Sleep(time.Until(due))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := p.Publish(ctx, topic, benchEnv(i)); err != nil {
				b.Error(err)
			}
			lat[i] = time.Since(due)
		}(i)
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
