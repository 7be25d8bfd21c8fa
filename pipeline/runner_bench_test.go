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
	"github.com/twmb/franz-go/pkg/kgo"

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

// BenchmarkConsumeBaseline is the bare consumer-group loop of franz-go's
// kgo, the client Run consumes with (PollFetches, fixed options, offsets
// committed every 10k records), on the same data as BenchmarkRun: the
// ceiling the runner is compared with. It replaced a kafka-go Reader loop:
// one Kafka client in go.mod.
func BenchmarkConsumeBaseline(b *testing.B) {
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics(tPrefix+tIn),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.FetchMaxBytes(10<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for n, pending := 0, 0; n < b.N; {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			b.Fatal(errs[0].Err)
		}
		k := fs.NumRecords()
		n, pending = n+k, pending+k
		if pending >= 10000 || n >= b.N {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				b.Fatal(err)
			}
			pending = 0
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
