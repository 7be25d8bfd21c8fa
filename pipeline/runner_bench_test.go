package pipeline

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"sendstream/schemas"
)

type countStage struct {
	n      atomic.Int64
	output bool
}

func (s *countStage) Handle(_ context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	s.n.Add(1)
	if s.output {
		return []schemas.Envelope{{Type: "bench.copied.v1", Key: env.Key, Payload: env.Payload}}, nil
	}
	return nil, nil
}

type countFlushStage struct{ countStage }

func (s *countFlushStage) Flush(context.Context) error { return nil }

// BenchmarkRun measures envelopes per second through Run: b.N envelopes are
// published first, then one stage consumes them all (4 partitions).
func BenchmarkRun(b *testing.B) {
	type counting interface {
		Stage
		count() int64
	}
	for _, tc := range []struct {
		name     string
		newStage func() counting
		produces []string
	}{
		{"flusher", func() counting { return &countFlushStage{} }, nil},
		{"outputs", func() counting { return &countStage{output: true} }, []string{tOut}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			st := tc.newStage()
			brokers := newCluster(b, tPrefix+tIn, tPrefix+tOut, tPrefix+schemas.TopicDeadLetter)
			p := newTestProducer(b, brokers, tPrefix)
			ctx := context.Background()
			const chunk = 1000
			for i := 0; i < b.N; i += chunk {
				envs := make([]schemas.Envelope, min(chunk, b.N-i))
				for j := range envs {
					envs[j] = benchEnv(i + j)
				}
				if err := p.Publish(ctx, tIn, envs...); err != nil {
					b.Fatal(err)
				}
			}
			cfg := RunConfig{
				Brokers: brokers, TopicPrefix: tPrefix,
				Stages:    []Registered{{Name: "bench-" + tc.name, Consumes: tIn, Produces: tc.produces, Build: func(context.Context, Resources) (Stage, error) { return st, nil }}},
				Resources: Resources{Publisher: p},
				Metrics:   prometheus.NewRegistry(),
				Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
			}
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			go func() { done <- Run(runCtx, cfg) }()
			for st.count() < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			elapsed, cpu := time.Since(start), cpuTime()-cpu0
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/msg")
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
		})
	}
}

func (s *countStage) count() int64 { return s.n.Load() }

// BenchmarkReaderBaseline is the bare kafka-go consumer-group loop
// (FetchMessage, commit every 10k) on the same data as BenchmarkRun: the
// ceiling the runner is compared with.
func BenchmarkReaderBaseline(b *testing.B) {
	brokers := newCluster(b, tPrefix+tIn)
	p := newTestProducer(b, brokers, tPrefix)
	ctx := context.Background()
	for i := 0; i < b.N; i += 1000 {
		envs := make([]schemas.Envelope, min(1000, b.N-i))
		for j := range envs {
			envs[j] = benchEnv(i + j)
		}
		if err := p.Publish(ctx, tIn, envs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "g", Topic: tPrefix + tIn, MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 200 * time.Millisecond, QueueCapacity: 1000, StartOffset: kafka.FirstOffset, ReadLagInterval: -1, HeartbeatInterval: time.Second, SessionTimeout: 10 * time.Second})
	defer r.Close()
	var last kafka.Message
	for i := 0; i < b.N; i++ {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		last = m
		if i%10000 == 9999 {
			if err := r.CommitMessages(ctx, last); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
}

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
