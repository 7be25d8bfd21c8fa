package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/pipeline"
	"sendstream/schemas"
)

// Retries, the dead-letter topic, breaker-aware waits, Flush and the drain
// in a stage with Concurrency > 1.

// retryStage fails by key: "flaky" twice retryably, "breaker" four times
// with ErrBreakerOpen (more than MaxRetries), "down" ten times marked
// Unavailable, "perm" permanently, "panic" by panicking; every other key
// succeeds.
type retryStage struct {
	mu      sync.Mutex
	calls   map[string]int
	done    map[string]bool
	attempt map[string]int // env.Attempt of the last call
}

func (s *retryStage) Handle(_ context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	s.mu.Lock()
	s.calls[env.ID]++
	n := s.calls[env.ID]
	if s.attempt != nil {
		s.attempt[env.ID] = env.Attempt
	}
	s.mu.Unlock()
	switch env.Key {
	case "flaky":
		if n <= 2 {
			return nil, errors.New("flaky")
		}
	case "breaker":
		if n <= 4 {
			return nil, fmt.Errorf("send: %w", pipeline.ErrBreakerOpen)
		}
	case "down":
		if n <= 10 {
			return nil, pipeline.Unavailable(errors.New("relay refused the connection"))
		}
	case "perm":
		return nil, pipeline.Permanent(errors.New("bad input"))
	case "panic":
		panic("boom")
	}
	s.mu.Lock()
	s.done[env.ID] = true
	s.mu.Unlock()
	return nil, nil
}

func TestKeyedRetriesAndDeadLettersPerEnvelope(t *testing.T) {
	prefix := "kretry."
	brokers := keyedCluster(t, prefix, "in", schemas.TopicDeadLetter)
	cl := kgoClient(t, brokers)
	var envs []schemas.Envelope
	for _, k := range []string{"flaky", "breaker", "down", "perm", "panic"} {
		envs = append(envs, keyedEnv(k, 0))
	}
	for i := range 200 {
		envs = append(envs, keyedEnv("fine"+strconv.Itoa(i%50), i))
	}
	at := produceEnvs(t, cl, prefix+"in", envs)
	junk := cl.ProduceSync(context.Background(), &kgo.Record{Topic: prefix + "in", Key: []byte("junk"), Value: []byte("{not json")})
	if err := junk.FirstErr(); err != nil {
		t.Fatal(err)
	}
	end := map[int32]int64{}
	for _, p := range at {
		end[p.partition] = max(end[p.partition], p.offset+1)
	}
	jr := junk[0].Record
	end[jr.Partition] = max(end[jr.Partition], jr.Offset+1)

	st := &retryStage{calls: map[string]int{}, done: map[string]bool{}, attempt: map[string]int{}}
	pub := &recPublisher{}
	reg := pipeline.Registered{Name: "kretry", Consumes: "in", Concurrency: 8,
		Build: func(context.Context, pipeline.Resources) (pipeline.Stage, error) { return st, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipeline.Run(ctx, keyedRunConfig(brokers, prefix, pub, reg)) }()
	defer func() { cancel(); <-done }()

	allCommitted := func() bool {
		got := committedOffsets(t, cl, pipeline.GroupID("kretry"), prefix+"in")
		for p, e := range end {
			if got[p] != e {
				return false
			}
		}
		return true
	}
	if !poll(20*time.Second, allCommitted) {
		t.Fatalf("committed %v, want %v", committedOffsets(t, cl, pipeline.GroupID("kretry"), prefix+"in"), end)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, env := range envs {
		dl := pub.has(schemas.TopicDeadLetter, schemas.ChildID(env.ID, "deadletter.kretry", 0))
		switch env.Key {
		case "perm", "panic":
			if !dl || st.calls[env.ID] != 1 {
				t.Errorf("%s: dead-lettered %v after %d calls; want dead-lettered after 1", env.ID, dl, st.calls[env.ID])
			}
		case "flaky":
			if dl || !st.done[env.ID] || st.calls[env.ID] != 3 {
				t.Errorf("flaky: dead-lettered %v, done %v after %d calls; want done on the 3rd", dl, st.done[env.ID], st.calls[env.ID])
			}
		case "breaker":
			// Open-breaker waits do not use up the two retries.
			if dl || !st.done[env.ID] || st.calls[env.ID] != 5 {
				t.Errorf("breaker: dead-lettered %v, done %v after %d calls; want done on the 5th", dl, st.done[env.ID], st.calls[env.ID])
			}
		case "down":
			// Unavailable tries neither use up the retries nor count as
			// attempts: a long outage dead-letters nothing.
			if dl || !st.done[env.ID] || st.calls[env.ID] != 11 || st.attempt[env.ID] != 0 {
				t.Errorf("down: dead-lettered %v, done %v after %d calls, attempt %d; want done on the 11th, attempt 0",
					dl, st.done[env.ID], st.calls[env.ID], st.attempt[env.ID])
			}
		default:
			if dl || !st.done[env.ID] {
				t.Errorf("%s: dead-lettered %v, done %v", env.ID, dl, st.done[env.ID])
			}
		}
	}
	src := fmt.Sprintf("%s/%d/%d", prefix+"in", jr.Partition, jr.Offset)
	if !pub.has(schemas.TopicDeadLetter, schemas.ChildID(src, "deadletter.kretry", 0)) {
		t.Error("the record that is not an envelope was not dead-lettered")
	}
}

// flushStage buffers ids in Handle and writes them in Flush; the first
// failFlushes Flush calls fail.
type flushStage struct {
	mu          sync.Mutex
	buf         []string
	written     map[string]bool
	flushes     int
	failFlushes int
}

func (s *flushStage) Handle(_ context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	time.Sleep(100 * time.Microsecond)
	s.mu.Lock()
	s.buf = append(s.buf, env.ID)
	s.mu.Unlock()
	return nil, nil
}

func (s *flushStage) Flush(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushes++
	if s.flushes <= s.failFlushes {
		return errors.New("sink down")
	}
	for _, id := range s.buf {
		s.written[id] = true
	}
	s.buf = s.buf[:0]
	return nil
}

func (s *flushStage) isWritten(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written[id]
}

// TestKeyedFlushBeforeCommit: a Flusher with Concurrency > 1 is flushed
// before each commit, so every committed envelope is written; failed
// Flushes commit nothing and the envelopes are read again.
func TestKeyedFlushBeforeCommit(t *testing.T) {
	prefix := "kflush."
	brokers := keyedCluster(t, prefix, "in", schemas.TopicDeadLetter)
	cl := kgoClient(t, brokers)
	var envs []schemas.Envelope
	for i := range 3000 {
		envs = append(envs, keyedEnv("f"+strconv.Itoa(i%300), i))
	}
	at := produceEnvs(t, cl, prefix+"in", envs)
	end := map[int32]int64{}
	for _, p := range at {
		end[p.partition] = max(end[p.partition], p.offset+1)
	}
	st := &flushStage{written: map[string]bool{}, failFlushes: 3} // MaxRetries 2: the first batch fails
	reg := pipeline.Registered{Name: "kflush", Consumes: "in", Concurrency: 8,
		Build: func(context.Context, pipeline.Resources) (pipeline.Stage, error) { return st, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipeline.Run(ctx, keyedRunConfig(brokers, prefix, &recPublisher{}, reg)) }()
	defer func() { cancel(); <-done }()

	check := func() (complete bool) {
		got := committedOffsets(t, cl, pipeline.GroupID("kflush"), prefix+"in")
		for _, env := range envs {
			if a := at[env.ID]; a.offset < got[a.partition] && !st.isWritten(env.ID) {
				t.Fatalf("%s is committed (partition %d at %d) but was never flushed", env.ID, a.partition, got[a.partition])
			}
		}
		for p, e := range end {
			if got[p] != e {
				return false
			}
		}
		return true
	}
	if !poll(30*time.Second, check) {
		t.Fatalf("committed %v, want %v", committedOffsets(t, cl, pipeline.GroupID("kflush"), prefix+"in"), end)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.flushes <= st.failFlushes {
		t.Fatalf("%d Flush calls; want more than the %d failing ones", st.flushes, st.failFlushes)
	}
	if len(st.written) != len(envs) {
		t.Fatalf("%d of %d envelopes written", len(st.written), len(envs))
	}
}

// drainStage blocks the envelope with id blockID until its ctx ends.
type drainStage struct {
	blockID string
	blocked chan struct{}
	once    sync.Once
}

func (s *drainStage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	if env.ID == s.blockID {
		s.once.Do(func() { close(s.blocked) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, nil
}

// TestKeyedDrainCommitsWhatFinished: cancelled while one envelope never
// finishes, Run returns within DrainTimeout with every other partition
// committed to its end and that one committed up to the stuck envelope; a
// second Run handles it.
func TestKeyedDrainCommitsWhatFinished(t *testing.T) {
	prefix := "kdrain."
	brokers := keyedCluster(t, prefix, "in", schemas.TopicDeadLetter)
	cl := kgoClient(t, brokers)
	var envs []schemas.Envelope
	for i := range 5 {
		for k := range 100 {
			envs = append(envs, keyedEnv("d"+strconv.Itoa(k), i))
		}
	}
	at := produceEnvs(t, cl, prefix+"in", envs)
	end := map[int32]int64{}
	for _, p := range at {
		end[p.partition] = max(end[p.partition], p.offset+1)
	}
	stuck := at["d7-2"]

	st := &drainStage{blockID: "d7-2", blocked: make(chan struct{})}
	reg := pipeline.Registered{Name: "kdrain", Consumes: "in", Concurrency: 4,
		Build: func(context.Context, pipeline.Resources) (pipeline.Stage, error) { return st, nil }}
	cfg := keyedRunConfig(brokers, prefix, &recPublisher{}, reg)
	cfg.DrainTimeout = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipeline.Run(ctx, cfg) }()
	select {
	case <-st.blocked:
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("the stuck envelope was never handled")
	}
	time.Sleep(500 * time.Millisecond) // let the rest finish
	cancel()
	start := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancel with DrainTimeout 1s")
	}
	if took := time.Since(start); took < cfg.DrainTimeout || took > cfg.DrainTimeout+5*time.Second {
		t.Errorf("the drain took %s; want about DrainTimeout (%s): it waits for the stuck envelope, bounded", took, cfg.DrainTimeout)
	}
	got := committedOffsets(t, cl, pipeline.GroupID("kdrain"), prefix+"in")
	for p, e := range end {
		want := e
		if p == stuck.partition {
			want = stuck.offset
		}
		if got[p] != want {
			t.Errorf("after the drain partition %d committed at %d, want %d (stuck envelope at partition %d offset %d)", p, got[p], want, stuck.partition, stuck.offset)
		}
	}

	st2 := &retryStage{calls: map[string]int{}, done: map[string]bool{}}
	reg.Build = func(context.Context, pipeline.Resources) (pipeline.Stage, error) { return st2, nil }
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- pipeline.Run(ctx2, keyedRunConfig(brokers, prefix, &recPublisher{}, reg)) }()
	defer func() { cancel2(); <-done2 }()
	if !poll(20*time.Second, func() bool {
		got := committedOffsets(t, cl, pipeline.GroupID("kdrain"), prefix+"in")
		return got[stuck.partition] == end[stuck.partition]
	}) {
		t.Fatal("the restarted stage did not commit past the envelope left by the drain")
	}
	st2.mu.Lock()
	defer st2.mu.Unlock()
	for _, id := range []string{"d7-2", "d7-3", "d7-4"} {
		if !st2.done[id] {
			t.Errorf("%s was not handled after the restart", id)
		}
	}
}

// failingPublisher fails its first fail calls, then records.
type failingPublisher struct {
	recPublisher
	mu    sync.Mutex
	calls int
	fail  int
}

func (p *failingPublisher) Publish(ctx context.Context, topic string, envs ...schemas.Envelope) error {
	p.mu.Lock()
	p.calls++
	failing := p.calls <= p.fail
	p.mu.Unlock()
	if failing {
		return errors.New("broker unreachable")
	}
	return p.recPublisher.Publish(ctx, topic, envs...)
}

// TestKeyedOutputPublishFailureRereads: when an envelope's outputs cannot
// be published (retries used up) it is not finished: the loop stops,
// commits what finished, reopens, and the envelope is handled again until
// its outputs are out; in the end every output is published and
// everything committed.
func TestKeyedOutputPublishFailureRereads(t *testing.T) {
	prefix := "kpub."
	brokers := keyedCluster(t, prefix, "in", "out", schemas.TopicDeadLetter)
	cl := kgoClient(t, brokers)
	var envs []schemas.Envelope
	for i := range 400 {
		envs = append(envs, keyedEnv("p"+strconv.Itoa(i%40), i))
	}
	at := produceEnvs(t, cl, prefix+"in", envs)
	end := map[int32]int64{}
	for _, p := range at {
		end[p.partition] = max(end[p.partition], p.offset+1)
	}
	st := &countKeyed{}
	pub := &failingPublisher{fail: 20} // 3 tries each (MaxRetries 2), 4 at once: some envelopes give up
	reg := pipeline.Registered{Name: "kpub", Consumes: "in", Produces: []string{"out"}, Concurrency: 4,
		Build: func(context.Context, pipeline.Resources) (pipeline.Stage, error) { return st, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipeline.Run(ctx, keyedRunConfig(brokers, prefix, pub, reg)) }()
	defer func() { cancel(); <-done }()
	if !poll(30*time.Second, func() bool {
		got := committedOffsets(t, cl, pipeline.GroupID("kpub"), prefix+"in")
		for p, e := range end {
			if got[p] != e {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("committed %v, want %v", committedOffsets(t, cl, pipeline.GroupID("kpub"), prefix+"in"), end)
	}
	for _, env := range envs {
		if !pub.has("out", schemas.ChildID(env.ID, "bench.copied.v1", 0)) {
			t.Fatalf("output of %s was never published", env.ID)
		}
	}
	if n := st.n.Load(); n <= int64(len(envs)) {
		t.Fatalf("%d Handle calls for %d envelopes: the ones whose publish failed were not handled again", n, len(envs))
	}
}
