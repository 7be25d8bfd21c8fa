package pipeline_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sendstream/pipeline"
	"sendstream/schemas"
)

// countKeyed counts Handle calls and returns one output per input.
type countKeyed struct {
	n     atomic.Int64
	sleep time.Duration
}

func (s *countKeyed) Handle(_ context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	if s.sleep > 0 {
		time.Sleep(s.sleep)
	}
	s.n.Add(1)
	return []schemas.Envelope{{Type: "bench.copied.v1", Key: env.Key, Payload: env.Payload}}, nil
}

// BenchmarkRunKeyed measures envelopes per second through Run for a stage
// with Concurrency 16 over 1,000 keys (b.N envelopes published first, 4
// partitions), with a Handle that returns at once and one that waits 1 ms
// (the outside world), against Concurrency 1 on the same 1 ms Handle.
// The time counted ends when every envelope is committed.
func BenchmarkRunKeyed(b *testing.B) {
	for _, tc := range []struct {
		name        string
		concurrency int
		sleep       time.Duration
	}{
		{"c16", 16, 0},
		{"c16-1ms", 16, time.Millisecond},
		{"c1-1ms", 1, time.Millisecond},
	} {
		b.Run(tc.name, func(b *testing.B) {
			prefix := "bench."
			brokers := keyedCluster(b, prefix, "in", "out", schemas.TopicDeadLetter)
			cl := kgoClient(b, brokers)
			const chunk = 1000
			end := map[int32]int64{}
			for i := 0; i < b.N; i += chunk {
				envs := make([]schemas.Envelope, min(chunk, b.N-i))
				for j := range envs {
					envs[j] = keyedEnv(fmt.Sprintf("b%d", (i+j)%1000), i+j)
				}
				for _, p := range produceEnvs(b, cl, prefix+"in", envs) {
					end[p.partition] = max(end[p.partition], p.offset+1)
				}
			}
			st := &countKeyed{sleep: tc.sleep}
			reg := pipeline.Registered{Name: "bench-" + tc.name, Consumes: "in", Produces: []string{"out"}, Concurrency: tc.concurrency,
				Build: func(context.Context, pipeline.Resources) (pipeline.Stage, error) { return st, nil }}
			cfg := keyedRunConfig(brokers, prefix, &recPublisher{}, reg)
			cfg.FlushInterval = time.Second
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			go func() { done <- pipeline.Run(ctx, cfg) }()
			for {
				got := committedOffsets(b, cl, pipeline.GroupID(reg.Name), prefix+"in")
				all := true
				for p, e := range end {
					all = all && got[p] == e
				}
				if all {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			elapsed, cpu := time.Since(start), cpuTime()-cpu0
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/msg")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
		})
	}
}

// cpuTime is the user and system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
