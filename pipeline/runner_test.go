package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sendstream/schemas"
)

const (
	tPrefix = "t."
	tIn     = "in"
	tOut    = "out"
)

// runnerCluster starts a broker with the input, output and dead-letter
// topics and returns its addresses and a producer.
func runnerCluster(t *testing.T) ([]string, *Producer) {
	t.Helper()
	brokers := newCluster(t, tPrefix+tIn, tPrefix+tOut, tPrefix+schemas.TopicDeadLetter)
	return brokers, newTestProducer(t, brokers, tPrefix)
}

func testRunConfig(brokers []string, p Publisher, stages ...Registered) RunConfig {
	return RunConfig{
		Brokers:           brokers,
		TopicPrefix:       tPrefix,
		Stages:            stages,
		Resources:         Resources{Publisher: p},
		MaxRetries:        2,
		BackoffBase:       time.Millisecond,
		BackoffMax:        20 * time.Millisecond,
		BatchSize:         100,
		FlushInterval:     100 * time.Millisecond,
		DrainTimeout:      5 * time.Second,
		MaxWait:           100 * time.Millisecond,
		SessionTimeout:    2 * time.Second,
		RebalanceTimeout:  2 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		JoinGroupBackoff:  100 * time.Millisecond,
		Metrics:           prometheus.NewRegistry(),
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func registered(name string, st Stage, produces ...string) Registered {
	return Registered{
		Name: name, Consumes: tIn, Produces: produces,
		Build: func(context.Context, Resources) (Stage, error) { return st, nil },
	}
}

// startRun runs Run in the background; the returned stop cancels it and
// returns Run's error.
func startRun(t *testing.T, cfg RunConfig) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				err = errors.New("Run did not return within 20s of cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func publishN(t *testing.T, p *Producer, topic string, n int) []schemas.Envelope {
	t.Helper()
	envs := make([]schemas.Envelope, n)
	for i := range envs {
		envs[i] = testEnv(fmt.Sprintf("key%d", i%7), i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Publish(ctx, topic, envs...); err != nil {
		t.Fatal(err)
	}
	return envs
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// committed returns the group's committed offset per partition of topic
// (-1 when none; empty while the group has not joined, as the broker then
// answers GROUP_ID_NOT_FOUND).
func committed(t *testing.T, brokers []string, stage, topic string) map[int]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = GroupID(stage)
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0, 1, 2, 3}
	req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(res.ErrorCode)
	}
	out := map[int]int64{}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range res.Topics {
		for _, p := range tp.Partitions {
			out[int(p.Partition)] = p.Offset
		}
	}
	return out
}

func totalCommitted(t *testing.T, brokers []string, stage string) int64 {
	var n int64
	for _, off := range committed(t, brokers, stage, tPrefix+tIn) {
		if off > 0 {
			n += off
		}
	}
	return n
}

// recorder is a test stage: it records what it handled and answers with the
// per-id behaviour configured in fail.
type recorder struct {
	mu       sync.Mutex
	handled  map[string]int // id -> times handled
	attempts map[string][]int
	fail     func(env schemas.Envelope, n int) error // n: times seen before
	output   bool
	closed   atomic.Int32
}

func newRecorder() *recorder {
	return &recorder{handled: map[string]int{}, attempts: map[string][]int{}}
}

func (r *recorder) Handle(_ context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	r.mu.Lock()
	n := r.handled[env.ID]
	r.handled[env.ID]++
	r.attempts[env.ID] = append(r.attempts[env.ID], env.Attempt)
	r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(env, n); err != nil {
			return nil, err
		}
	}
	if !r.output {
		return nil, nil
	}
	return []schemas.Envelope{{Type: "test.copied.v1", Key: env.Key, Payload: env.Payload}}, nil
}

func (r *recorder) Close() error { r.closed.Add(1); return nil }

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.handled)
}

func (r *recorder) times(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handled[id]
}

func TestRunPublishesOutputsThenCommits(t *testing.T) {
	brokers, p := runnerCluster(t)
	st := newRecorder()
	st.output = true
	cfg := testRunConfig(brokers, p, registered("copy", st, tOut))
	start := time.Now()
	stop := startRun(t, cfg)

	// Light traffic: one envelope goes through with low latency once the
	// group has joined.
	first := publishN(t, p, tIn, 1)[0]
	waitFor(t, "first envelope", 10*time.Second, func() bool { return st.times(first.ID) > 0 })
	t.Logf("group join + first envelope: %s", time.Since(start))
	sent := time.Now()
	single := testEnv("single", 0)
	if err := p.Publish(context.Background(), tIn, single); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "single envelope", 5*time.Second, func() bool { return st.times(single.ID) > 0 })
	t.Logf("publish -> Handle latency with an idle group: %s", time.Since(sent))

	envs := publishN(t, p, tIn, 300)
	outs := consume(t, brokers, tPrefix+tOut, 302, 20*time.Second)
	byCause := map[string]schemas.Envelope{}
	for _, m := range outs {
		env := decode(t, m)
		byCause[env.CausationID] = env
	}
	for _, in := range append(envs, first, single) {
		out, ok := byCause[in.ID]
		if !ok {
			t.Fatalf("no output caused by %s", in.ID)
		}
		if out.ID != schemas.ChildID(in.ID, "test.copied.v1", 0) || out.Workspace != in.Workspace {
			t.Fatalf("output %+v of %s: id or workspace not derived from the input", out, in.ID)
		}
	}
	waitFor(t, "commits", 10*time.Second, func() bool { return totalCommitted(t, brokers, "copy") == 302 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st.closed.Load() != 1 {
		t.Fatalf("Close called %d times", st.closed.Load())
	}
	text := metricsText(t, cfg.Metrics)
	if !strings.Contains(text, `sendstream_stage_processed_total{stage="copy"} 302`) {
		t.Fatalf("processed metric:\n%s", text)
	}
	// Handle times are sampled, one call in handleSample: calls 0, 8, … 296.
	if want := fmt.Sprintf(`sendstream_stage_handle_seconds_count{stage="copy"} %d`, (302+handleSample-1)/handleSample); !strings.Contains(text, want) {
		t.Fatalf("handle-time samples: want %s in\n%s", want, text)
	}
}

func TestRunRetriesThenDeadLetters(t *testing.T) {
	brokers, p := runnerCluster(t)
	st := newRecorder()
	st.fail = func(env schemas.Envelope, n int) error {
		switch {
		case strings.HasPrefix(env.ID, "perm"):
			return Permanent(errors.New("bad recipient"))
		case strings.HasPrefix(env.ID, "flaky") && n < 2:
			return errors.New("timeout")
		case strings.HasPrefix(env.ID, "broken"):
			return errors.New("still timing out")
		case strings.HasPrefix(env.ID, "panic"):
			panic("nil map")
		}
		return nil
	}
	cfg := testRunConfig(brokers, p, registered("dlq", st))
	startRun(t, cfg)

	ctx := context.Background()
	envs := []schemas.Envelope{testEnv("perm", 1), testEnv("flaky", 1), testEnv("broken", 1), testEnv("panic", 1), testEnv("fine", 1)}
	for i := range envs {
		envs[i].ID = envs[i].Key
		envs[i].Key = "same-key" // one partition, in order
	}
	if err := p.Publish(ctx, tIn, envs[:2]...); err != nil {
		t.Fatal(err)
	}
	// A record that is not an envelope.
	w, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.ProduceSync(ctx, &kgo.Record{Topic: tPrefix + tIn, Partition: 0, Key: []byte("junk"), Value: []byte("{not json")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, tIn, envs[2:]...); err != nil {
		t.Fatal(err)
	}

	dls := consume(t, brokers, tPrefix+schemas.TopicDeadLetter, 4, 20*time.Second)
	got := map[string]DeadLetter{}
	for _, m := range dls {
		env := decode(t, m)
		if env.Type != TypeDeadLettered {
			t.Fatalf("dead-letter type %q", env.Type)
		}
		var dl DeadLetter
		if err := json.Unmarshal(env.Payload, &dl); err != nil {
			t.Fatal(err)
		}
		if dl.Stage != "dlq" || dl.Topic != tPrefix+tIn {
			t.Fatalf("dead letter %+v", dl)
		}
		id := "raw"
		if dl.Envelope != nil {
			id = dl.Envelope.ID
			if env.ID != schemas.ChildID(id, "deadletter.dlq", 0) || env.CausationID != id {
				t.Fatalf("dead-letter envelope ids: %+v", env)
			}
		}
		got[id] = dl
	}
	if dl := got["perm"]; !dl.Permanent || dl.Attempts != 1 || !strings.Contains(dl.Error, "bad recipient") {
		t.Fatalf("permanent: %+v", dl)
	}
	if dl := got["broken"]; dl.Permanent || dl.Attempts != 3 || dl.Envelope.Attempt != 2 {
		t.Fatalf("exhausted (MaxRetries 2): %+v", dl)
	}
	if dl := got["panic"]; !dl.Permanent || !strings.Contains(dl.Error, "panicked") {
		t.Fatalf("panic: %+v", dl)
	}
	if dl := got["raw"]; !dl.Permanent || string(dl.Raw) != "{not json" {
		t.Fatalf("undecodable: %+v", dl)
	}
	if _, ok := got["flaky"]; ok {
		t.Fatal("flaky envelope dead-lettered although its third attempt succeeds")
	}
	st.mu.Lock()
	flaky := fmt.Sprint(st.attempts["flaky"])
	st.mu.Unlock()
	if flaky != "[0 1 2]" {
		t.Fatalf("flaky attempts seen by Handle = %s, want [0 1 2]", flaky)
	}
	// All six records are finished, so all are committed.
	waitFor(t, "commits", 10*time.Second, func() bool { return totalCommitted(t, brokers, "dlq") == 6 })
	if st.times("fine") != 1 {
		t.Fatalf("fine handled %d times", st.times("fine"))
	}
}

// sinkStage buffers in Handle and "writes" to a shared sink in Flush, like a
// ClickHouse batch stage. It dedups its buffer by id.
type sinkStage struct {
	mu        sync.Mutex
	buf       map[string]bool
	sink      *sync.Map
	failing   atomic.Bool
	flushes   atomic.Int32
	failures  atomic.Int32
	slow      time.Duration
	handles   atomic.Int32
	closedAt  atomic.Int64
	lastFlush atomic.Int64
}

func (s *sinkStage) Handle(_ context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	s.handles.Add(1)
	if s.slow > 0 {
		time.Sleep(s.slow)
	}
	s.mu.Lock()
	if s.buf == nil {
		s.buf = map[string]bool{}
	}
	s.buf[env.ID] = true
	s.mu.Unlock()
	return nil, nil
}

func (s *sinkStage) Flush(context.Context) error {
	s.flushes.Add(1)
	s.lastFlush.Store(time.Now().UnixNano())
	if s.failing.Load() {
		s.failures.Add(1)
		return errors.New("clickhouse: connection refused")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.buf {
		s.sink.Store(id, true)
	}
	clear(s.buf)
	return nil
}

func (s *sinkStage) Close() error { s.closedAt.Store(time.Now().UnixNano()); return nil }

func syncLen(m *sync.Map) int {
	n := 0
	m.Range(func(_, _ any) bool { n++; return true })
	return n
}

func TestRunFlushFailureCommitsNothingAndRedelivers(t *testing.T) {
	brokers, p := runnerCluster(t)
	st := &sinkStage{sink: &sync.Map{}}
	st.failing.Store(true)
	cfg := testRunConfig(brokers, p, registered("sink", st))
	cfg.MaxRetries = 1
	startRun(t, cfg)

	envs := publishN(t, p, tIn, 50)
	// Two failed flushes (first try + one retry) make the runner give up on
	// the batch and reopen the reader. The first batches may hold only part
	// of the 50 (they arrive over several fetches), so wait until every
	// envelope has been handled at least twice: the reader went back.
	waitFor(t, "flush failures and rereads", 15*time.Second, func() bool {
		return st.failures.Load() >= 4 && st.handles.Load() >= 2*int32(len(envs))
	})
	if n := totalCommitted(t, brokers, "sink"); n != 0 {
		t.Fatalf("committed %d offsets although Flush never succeeded", n)
	}
	if syncLen(st.sink) != 0 {
		t.Fatal("sink written although Flush failed")
	}
	st.failing.Store(false)
	waitFor(t, "all in sink", 15*time.Second, func() bool { return syncLen(st.sink) == len(envs) })
	waitFor(t, "commits", 10*time.Second, func() bool { return totalCommitted(t, brokers, "sink") == int64(len(envs)) })
	text := metricsText(t, cfg.Metrics)
	if !strings.Contains(text, `sendstream_stage_reopens_total{stage="sink"}`) || strings.Contains(text, `sendstream_stage_reopens_total{stage="sink"} 0`) {
		t.Fatalf("no reopen counted:\n%s", text)
	}
}

func TestRunAtLeastOnceAcrossRestartAndDrain(t *testing.T) {
	brokers, p := runnerCluster(t)
	sink := &sync.Map{}
	const n = 3000
	envs := publishN(t, p, tIn, n)

	// First run: stopped mid-stream.
	st1 := &sinkStage{sink: sink, slow: 200 * time.Microsecond}
	cfg := testRunConfig(brokers, p, registered("alo", st1))
	cfg.FlushInterval = time.Hour // only BatchSize and the drain flush
	stop := startRun(t, cfg)
	waitFor(t, "some progress", 20*time.Second, func() bool { return syncLen(sink) >= 500 })
	if err := stop(); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	if st1.closedAt.Load() == 0 || st1.closedAt.Load() < st1.lastFlush.Load() {
		t.Fatal("stage not closed after its last Flush")
	}
	done := syncLen(sink)
	if done >= n {
		t.Fatalf("first run finished everything (%d); the test needs a slower stage", done)
	}
	// Commit after success: everything below each committed offset is in
	// the sink (the drain flushed the partial batch and committed it).
	offsets := committed(t, brokers, "alo", tPrefix+tIn)
	all := consume(t, brokers, tPrefix+tIn, n, 20*time.Second)
	var below int
	for _, m := range all {
		if m.Offset < offsets[m.Partition] {
			below++
			if _, ok := sink.Load(decode(t, m).ID); !ok {
				t.Fatalf("offset %d of partition %d committed but %s not in sink", m.Offset, m.Partition, decode(t, m).ID)
			}
		}
	}
	if below != done {
		t.Fatalf("drain: %d envelopes in the sink but %d committed", done, below)
	}
	t.Logf("first run: %d of %d done and committed at cancel", done, n)

	// Second run picks up from the commits: nothing lost.
	st2 := &sinkStage{sink: sink}
	startRun(t, testRunConfig(brokers, p, registered("alo", st2)))
	waitFor(t, "everything in sink", 20*time.Second, func() bool { return syncLen(sink) == n })
	for _, e := range envs {
		if _, ok := sink.Load(e.ID); !ok {
			t.Fatalf("%s lost", e.ID)
		}
	}
}

func TestRunBreakerOpenWaitsWithoutDeadLettering(t *testing.T) {
	brokers, p := runnerCluster(t)
	st := newRecorder()
	st.fail = func(env schemas.Envelope, n int) error {
		if n < 5 { // more than MaxRetries (2)
			return fmt.Errorf("smtp: %w", ErrBreakerOpen)
		}
		return nil
	}
	cfg := testRunConfig(brokers, p, registered("brk", st))
	startRun(t, cfg)
	env := publishN(t, p, tIn, 1)[0]
	waitFor(t, "success after the breaker closes", 15*time.Second, func() bool { return st.times(env.ID) == 6 })
	waitFor(t, "commit", 10*time.Second, func() bool { return totalCommitted(t, brokers, "brk") == 1 })
	if got := consumeFor(t, brokers, tPrefix+schemas.TopicDeadLetter, time.Second); len(got) != 0 {
		t.Fatalf("%d dead letters while the breaker was open", len(got))
	}
}

func TestRunMisroutedOutputIsDeadLettered(t *testing.T) {
	brokers, p := runnerCluster(t)
	st := newRecorder()
	st.output = true
	reg := registered("route", st, tOut, "other")
	reg.Route = func(schemas.Envelope) string { return "elsewhere" }
	startRun(t, testRunConfig(brokers, p, reg))
	publishN(t, p, tIn, 1)
	dls := consume(t, brokers, tPrefix+schemas.TopicDeadLetter, 1, 15*time.Second)
	var dl DeadLetter
	if err := json.Unmarshal(decode(t, dls[0]).Payload, &dl); err != nil {
		t.Fatal(err)
	}
	if !dl.Permanent || !strings.Contains(dl.Error, "elsewhere") {
		t.Fatalf("misrouted output: %+v", dl)
	}
}

func TestRunBuildFailureClosesBuiltStages(t *testing.T) {
	brokers, p := runnerCluster(t)
	ok := newRecorder()
	bad := Registered{Name: "bad", Consumes: tIn, Build: func(context.Context, Resources) (Stage, error) {
		return nil, errors.New("no ClickHouse")
	}}
	err := Run(context.Background(), testRunConfig(brokers, p, registered("ok", ok), bad))
	if err == nil || !strings.Contains(err.Error(), "build stage bad: no ClickHouse") {
		t.Fatalf("Run = %v", err)
	}
	if ok.closed.Load() != 1 {
		t.Fatal("built stage not closed")
	}
}

func TestRunConfigValidate(t *testing.T) {
	st := registered("x", newRecorder())
	for name, cfg := range map[string]RunConfig{
		"no brokers":   {Stages: []Registered{st}, Resources: Resources{Publisher: nopPublisher{}}},
		"no stages":    {Brokers: []string{"b"}, Resources: Resources{Publisher: nopPublisher{}}},
		"no publisher": {Brokers: []string{"b"}, Stages: []Registered{st}},
		"twice":        {Brokers: []string{"b"}, Stages: []Registered{st, st}, Resources: Resources{Publisher: nopPublisher{}}},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, string, ...schemas.Envelope) error { return nil }

var registerSel sync.Once

func TestSelectStages(t *testing.T) {
	registerSel.Do(func() {
		for _, n := range []string{"zz-sel-a", "zz-sel-b"} {
			Register(Spec[struct{}]{Name: n, Consumes: tIn, New: func(context.Context, Resources, struct{}) (Stage, error) {
				return newRecorder(), nil
			}})
		}
	})
	got, err := SelectStages("zz-sel-b,zz-sel-a", "zz-sel-b")
	if err != nil || len(got) != 2 || got[0].Name != "zz-sel-b" || got[1].Name != "zz-sel-a" {
		t.Fatalf("SelectStages = %v, %v", got, err)
	}
	if _, err := SelectStages("zz-sel-a,nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown stage: %v", err)
	}
	all, _ := SelectStages()
	if len(all) != len(Stages()) {
		t.Fatal("no names must select every stage")
	}
}

func TestRunDrainAbandonsEnvelopeInRetry(t *testing.T) {
	brokers, p := runnerCluster(t)
	st := newRecorder()
	var failing atomic.Bool
	failing.Store(true)
	st.fail = func(env schemas.Envelope, n int) error {
		if env.Key == "stuck" && failing.Load() {
			return errors.New("provider timeout")
		}
		return nil
	}
	cfg := testRunConfig(brokers, p, registered("abandon", st))
	cfg.MaxRetries = 100
	cfg.BackoffBase = time.Hour // the retry waits until the drain
	cfg.BackoffMax = time.Hour
	stop := startRun(t, cfg)

	ok := testEnv("fine", 1)
	stuck := testEnv("stuck", 1)
	ctx := context.Background()
	if err := p.Publish(ctx, tIn, ok); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "fine envelope", 10*time.Second, func() bool { return st.times(ok.ID) == 1 })
	waitFor(t, "its commit", 10*time.Second, func() bool { return totalCommitted(t, brokers, "abandon") == 1 })
	if err := p.Publish(ctx, tIn, stuck); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "first failure", 10*time.Second, func() bool { return st.times(stuck.ID) == 1 })
	began := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("drain took %s with an envelope in retry backoff", d)
	}
	if n := totalCommitted(t, brokers, "abandon"); n != 1 {
		t.Fatalf("committed %d: the abandoned envelope must not be committed", n)
	}
	if got := consumeFor(t, brokers, tPrefix+schemas.TopicDeadLetter, 500*time.Millisecond); len(got) != 0 {
		t.Fatal("abandoned envelope was dead-lettered")
	}
	// The next run gets it again.
	failing.Store(false)
	cfg.BackoffBase, cfg.BackoffMax = time.Millisecond, time.Millisecond
	startRun(t, cfg)
	waitFor(t, "redelivery", 10*time.Second, func() bool { return st.times(stuck.ID) == 2 })
	waitFor(t, "commit", 10*time.Second, func() bool { return totalCommitted(t, brokers, "abandon") == 2 })
	if st.times(ok.ID) != 1 {
		t.Fatalf("committed envelope handled %d times", st.times(ok.ID))
	}
}

// TestRunBatchBytesEndsBatches: with neither the count nor the interval
// reached, a batch ends once BatchBytes of envelopes were handled.
func TestRunBatchBytesEndsBatches(t *testing.T) {
	brokers, p := runnerCluster(t)
	sink := &sync.Map{}
	const n = 200
	envs := publishN(t, p, tIn, n)
	st := &sinkStage{sink: sink}
	cfg := testRunConfig(brokers, p, registered("bytes", st))
	cfg.BatchSize, cfg.FlushInterval = 1_000_000, time.Hour
	one, err := schemas.AppendEnvelope(nil, &envs[0])
	if err != nil {
		t.Fatal(err)
	}
	cfg.BatchBytes = 20 * len(one) // about 20 envelopes a batch
	startRun(t, cfg)
	waitFor(t, "batches flushed by size", 20*time.Second, func() bool { return syncLen(sink) >= n-20 })
	if f := st.flushes.Load(); f < 5 {
		t.Fatalf("%d flushes for %d envelopes of ~1/20 BatchBytes each; want batches ended by size", f, syncLen(sink))
	}
}

// slowStage handles one envelope per delay and keeps no buffer (no Flush).
type slowStage struct {
	delay   time.Duration
	handles atomic.Int32
}

func (s *slowStage) Handle(context.Context, schemas.Envelope) ([]schemas.Envelope, error) {
	time.Sleep(s.delay)
	s.handles.Add(1)
	return nil, nil
}

// TestRunFlushIntervalEndsBatchesOfASteadyStream: when envelopes are always
// waiting (the stage is slower than its backlog), a batch still ends
// FlushInterval after its first envelope: a Flusher is flushed and a plain
// stage commits while the backlog lasts, not only once it runs dry.
func TestRunFlushIntervalEndsBatchesOfASteadyStream(t *testing.T) {
	brokers, p := runnerCluster(t)
	const n = 600 // about 1.2 s of handling at 2 ms each
	publishN(t, p, tIn, n)

	sink := &sync.Map{}
	flusher := &sinkStage{sink: sink, slow: 2 * time.Millisecond}
	plain := &slowStage{delay: 2 * time.Millisecond}
	cfg := testRunConfig(brokers, p, registered("steady-flusher", flusher), registered("steady-plain", plain))
	cfg.BatchSize, cfg.FlushInterval = 1_000_000, 100*time.Millisecond
	startRun(t, cfg)

	var flushesMidway int32
	var committedMidway int64
	waitFor(t, "half the backlog handled", 20*time.Second, func() bool {
		if flusher.handles.Load() < n/2 || plain.handles.Load() < n/2 {
			return false
		}
		flushesMidway = flusher.flushes.Load()
		committedMidway = totalCommitted(t, brokers, "steady-plain")
		return true
	})
	if flushesMidway < 3 {
		t.Errorf("%d flushes after %d of %d envelopes at 2 ms each with a 100 ms interval; want batches ended by time", flushesMidway, n/2, n)
	}
	if committedMidway == 0 {
		t.Errorf("the plain stage committed nothing after %d of %d envelopes; want commits every 100 ms", n/2, n)
	}
	waitFor(t, "everything committed", 20*time.Second, func() bool {
		return totalCommitted(t, brokers, "steady-plain") == n && totalCommitted(t, brokers, "steady-flusher") == n
	})
}

// TestRunTwoMembersShareTheGroup runs one stage in two processes' worth of
// runners: the partitions are split between them, every envelope is
// handled, and when one member stops the other takes its partitions over.
func TestRunTwoMembersShareTheGroup(t *testing.T) {
	for _, concurrency := range []int{1, 8} {
		t.Run(fmt.Sprintf("concurrency %d", concurrency), func(t *testing.T) { testTwoMembers(t, concurrency) })
	}
}

// testTwoMembers: two members of one group split the partitions, and when
// one stops the other takes over everything; with Concurrency > 1 the
// rebalances happen while envelopes are in flight.
func testTwoMembers(t *testing.T, concurrency int) {
	brokers, p := runnerCluster(t)
	a, b := newRecorder(), newRecorder()
	regA, regB := registered("pair", a), registered("pair", b)
	regA.Concurrency, regB.Concurrency = concurrency, concurrency
	stopA := startRun(t, testRunConfig(brokers, p, regA))
	startRun(t, testRunConfig(brokers, p, regB))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []string
	publish := func(batches int) {
		for i := 0; i < batches; i++ {
			envs := make([]schemas.Envelope, 50)
			for j := range envs {
				envs[j] = testEnv(fmt.Sprintf("k%d", len(ids)), len(ids))
				ids = append(ids, envs[j].ID)
			}
			if err := p.Publish(ctx, tIn, envs...); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	handled := func(id string) bool { return a.times(id) > 0 || b.times(id) > 0 }
	allHandled := func() bool {
		for _, id := range ids {
			if !handled(id) {
				return false
			}
		}
		return true
	}
	// Publish until both members have handled something: they joined and
	// the partitions were split.
	waitFor(t, "both members handling", 20*time.Second, func() bool {
		publish(1)
		return a.count() > 0 && b.count() > 0
	})
	publish(10)
	waitFor(t, "every envelope handled", 20*time.Second, allHandled)
	t.Logf("%d envelopes: member a handled %d, member b %d", len(ids), a.count(), b.count())

	if err := stopA(); err != nil {
		t.Fatalf("member a: %v", err)
	}
	before := b.count()
	publish(10)
	waitFor(t, "member b takes over", 20*time.Second, allHandled)
	if b.count()-before < 500 {
		t.Fatalf("member b handled %d of the 500 envelopes published after a stopped", b.count()-before)
	}
	waitFor(t, "offsets committed", 20*time.Second, func() bool { return totalCommitted(t, brokers, "pair") == int64(len(ids)) })
}

// TestFetchErrorIgnoresDataLoss: kgo's data-loss notice is informational
// (the client resumes at the earliest offset left); any other fetch error
// reopens the client.
func TestFetchErrorIgnoresDataLoss(t *testing.T) {
	s := &stageRunner{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	loss := kgo.FetchPartition{Partition: 1, Err: &kgo.ErrDataLoss{Topic: "t", Partition: 1, ConsumedTo: 10, ResetTo: 20}}
	fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "t", Partitions: []kgo.FetchPartition{loss}}}}}
	if err := s.fetchError(fs); err != nil {
		t.Fatalf("data loss reopens the client: %v", err)
	}
	broken := kgo.FetchPartition{Partition: 2, Err: errors.New("invalid record batch")}
	fs[0].Topics[0].Partitions = append(fs[0].Topics[0].Partitions, broken)
	if err := s.fetchError(fs); err == nil || !strings.Contains(err.Error(), "partition 2: invalid record batch") {
		t.Fatalf("fetchError = %v, want partition 2's error", err)
	}
}
