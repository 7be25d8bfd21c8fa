package pipeline_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sendstream/pipeline"
	"sendstream/schemas"
)

// blockingStage handles envelopes of many keys concurrently; the envelope
// with id blockID waits until release is closed. It records the order of
// each key's envelopes and the most Handle calls seen at once, and returns
// one output per input.
type blockingStage struct {
	blockID string
	release chan struct{}
	blocked chan struct{} // closed when the blocked call started

	mu      sync.Mutex
	order   map[string][]int // key -> envelope numbers in handling order
	handled map[string]bool

	running, maxRunning atomic.Int32
	blockOnce           sync.Once
}

func (s *blockingStage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	n := s.running.Add(1)
	defer s.running.Add(-1)
	for {
		m := s.maxRunning.Load()
		if n <= m || s.maxRunning.CompareAndSwap(m, n) {
			break
		}
	}
	if env.ID == s.blockID {
		s.blockOnce.Do(func() { close(s.blocked) })
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	time.Sleep(200 * time.Microsecond) // a little outside-world latency
	i, err := strconv.Atoi(env.ID[strings.LastIndexByte(env.ID, '-')+1:])
	if err != nil {
		return nil, pipeline.Permanent(err)
	}
	s.mu.Lock()
	s.order[env.Key] = append(s.order[env.Key], i)
	s.handled[env.ID] = true
	s.mu.Unlock()
	return []schemas.Envelope{{Type: "test.copied.v1", Key: env.Key, Payload: env.Payload}}, nil
}

func (s *blockingStage) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.handled)
}

// TestKeyedSlowKeyHoldsOnlyItsKey: 1,000 keys, five envelopes each; the
// third envelope of one key blocks for 10 s. Every other envelope, the
// blocked key's later ones excepted, finishes long before, each key in
// order; the committed offset of the blocked envelope's partition stops
// exactly at it while the other partitions commit to their end; after the
// release everything is handled and committed, and every output was
// published before its input was committed.
func TestKeyedSlowKeyHoldsOnlyItsKey(t *testing.T) {
	const (
		keys, perKey = 1000, 5
		blockFor     = 10 * time.Second
		concurrency  = 16
	)
	prefix := "keyed."
	brokers := keyedCluster(t, prefix, "in", "out", schemas.TopicDeadLetter)
	cl := kgoClient(t, brokers)

	envs := make([]schemas.Envelope, 0, keys*perKey)
	for i := range perKey {
		for k := range keys {
			envs = append(envs, keyedEnv(fmt.Sprintf("k%d", k), i))
		}
	}
	at := produceEnvs(t, cl, prefix+"in", envs)
	blockedAt := at["k0-2"]
	end := map[int32]int64{}
	for _, p := range at {
		end[p.partition] = max(end[p.partition], p.offset+1)
	}

	st := &blockingStage{blockID: "k0-2", release: make(chan struct{}), blocked: make(chan struct{}),
		order: map[string][]int{}, handled: map[string]bool{}}
	pub := &recPublisher{}
	reg := pipeline.Registered{
		Name: "keyed", Consumes: "in", Produces: []string{"out"}, Concurrency: concurrency,
		Build: func(context.Context, pipeline.Resources) (pipeline.Stage, error) { return st, nil },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- pipeline.Run(ctx, keyedRunConfig(brokers, prefix, pub, reg)) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Run did not return within 20s of cancel")
		}
	}()

	select {
	case <-st.blocked:
	case <-time.After(blockFor):
		t.Fatal("the blocked envelope was never handled")
	}
	releaseAt := start.Add(blockFor)
	// Everything but k0-2 and the two behind it on its key finishes while
	// it is blocked, at full speed: well before the 10 s are up.
	want := keys*perKey - 3
	if !poll(time.Until(releaseAt), func() bool { return st.count() >= want }) {
		t.Fatalf("while one key was blocked only %d of %d other envelopes were handled in %s", st.count(), want, blockFor)
	}
	took := time.Since(start)
	if took > blockFor/2 {
		t.Errorf("the other keys took %s to finish with one key blocked; want well under %s", took, blockFor)
	}
	if n := st.count(); n != want {
		t.Errorf("handled %d envelopes while k0-2 was blocked, want exactly %d (k0-3 and k0-4 must wait)", n, want)
	}
	if m := st.maxRunning.Load(); m < 2 || m > concurrency {
		t.Errorf("at most %d Handle calls ran at once; want between 2 and %d", m, concurrency)
	}
	t.Logf("%d envelopes handled in %s with k0-2 blocked; at most %d at once", want, took, st.maxRunning.Load())

	// The committed offsets, read from the broker while k0-2 is blocked:
	// its partition stops exactly at it, the others reach their end.
	wantCommitted := func(p int32) int64 {
		if p == blockedAt.partition {
			return blockedAt.offset
		}
		return end[p]
	}
	settled := poll(time.Until(releaseAt)-time.Second, func() bool {
		got := committedOffsets(t, cl, pipeline.GroupID("keyed"), prefix+"in")
		for p := range int32(keyedParts) {
			if got[p] != wantCommitted(p) && end[p] > 0 {
				return false
			}
		}
		return true
	})
	if !settled {
		t.Errorf("committed offsets while blocked: %v; want %d on partition %d (the blocked envelope) and the ends %v elsewhere",
			committedOffsets(t, cl, pipeline.GroupID("keyed"), prefix+"in"), blockedAt.offset, blockedAt.partition, end)
	}
	// Every envelope behind a committed offset has its output published.
	got := committedOffsets(t, cl, pipeline.GroupID("keyed"), prefix+"in")
	for _, env := range envs {
		if a := at[env.ID]; a.offset < got[a.partition] && !pub.has("out", schemas.ChildID(env.ID, "test.copied.v1", 0)) {
			t.Fatalf("%s (partition %d offset %d) is committed (%d) but its output was not published", env.ID, a.partition, a.offset, got[a.partition])
		}
	}
	for time.Now().Before(releaseAt) {
		got := committedOffsets(t, cl, pipeline.GroupID("keyed"), prefix+"in")
		if got[blockedAt.partition] > blockedAt.offset {
			t.Fatalf("committed offset %d of partition %d passed the blocked envelope at %d", got[blockedAt.partition], blockedAt.partition, blockedAt.offset)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(st.release)

	if !poll(10*time.Second, func() bool { return st.count() == keys*perKey }) {
		t.Fatalf("after the release %d of %d envelopes handled", st.count(), keys*perKey)
	}
	if !poll(10*time.Second, func() bool {
		got := committedOffsets(t, cl, pipeline.GroupID("keyed"), prefix+"in")
		for p, e := range end {
			if got[p] != e {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("after the release committed %v, want %v", committedOffsets(t, cl, pipeline.GroupID("keyed"), prefix+"in"), end)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for k, order := range st.order {
		for i, n := range order {
			if n != i {
				t.Fatalf("key %s handled in order %v, want 0..%d", k, order, perKey-1)
			}
		}
	}
	for _, env := range envs {
		if !pub.has("out", schemas.ChildID(env.ID, "test.copied.v1", 0)) {
			t.Fatalf("output of %s was not published", env.ID)
		}
	}
}

// TestKeyedTrackerBoundPausesFetching: with RunConfig.MaxTracked 100 and
// one envelope blocked, the envelopes after it on its partition finish but
// stay tracked (the commit position cannot pass the blocked one), so the
// stage stops fetching once 100 records are tracked instead of holding
// more and more; after the release every envelope is handled.
func TestKeyedTrackerBoundPausesFetching(t *testing.T) {
	const keys, perKey, bound = 1000, 2, 100
	prefix := "keyedbound."
	brokers := keyedCluster(t, prefix, "in", "out", schemas.TopicDeadLetter)
	cl := kgoClient(t, brokers)
	envs := make([]schemas.Envelope, 0, keys*perKey)
	for i := range perKey {
		for k := range keys {
			envs = append(envs, keyedEnv(fmt.Sprintf("k%d", k), i))
		}
	}
	produceEnvs(t, cl, prefix+"in", envs)

	st := &blockingStage{blockID: "k0-0", release: make(chan struct{}), blocked: make(chan struct{}),
		order: map[string][]int{}, handled: map[string]bool{}}
	reg := pipeline.Registered{
		Name: "keyedbound", Consumes: "in", Produces: []string{"out"}, Concurrency: 16,
		Build: func(context.Context, pipeline.Resources) (pipeline.Stage, error) { return st, nil },
	}
	cfg := keyedRunConfig(brokers, prefix, &recPublisher{}, reg)
	cfg.MaxTracked = bound
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipeline.Run(ctx, cfg) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	<-st.blocked
	// Wait until handling stops: the count stays the same for a second.
	last := -1
	for n := st.count(); n != last; n = st.count() {
		last = n
		time.Sleep(time.Second)
	}
	if want := keys*perKey - 2; last >= want {
		t.Fatalf("with k0-0 blocked and MaxTracked %d, %d of the %d other envelopes were handled: fetching never paused", bound, last, want)
	}
	t.Logf("fetching paused after %d envelopes with k0-0 blocked", last)
	close(st.release)
	if !poll(20*time.Second, func() bool { return st.count() == keys*perKey }) {
		t.Fatalf("after the release %d of %d envelopes handled", st.count(), keys*perKey)
	}
}

// TestKeyedPassedOverRecordsNeverCommitPastOneInFlight: records of a type
// the stage does not handle finish as they arrive (no worker, no key
// queue), yet the commit position of their partition still stops at an
// envelope in flight before them, here one blocked on the same key; after
// its release the partition commits to its end and each kept envelope was
// handled once, the passed-over ones never.
func TestKeyedPassedOverRecordsNeverCommitPastOneInFlight(t *testing.T) {
	prefix := "skip."
	brokers := keyedCluster(t, prefix, "in", "out", schemas.TopicDeadLetter)
	cl := kgoClient(t, brokers)

	var envs []schemas.Envelope
	add := func(id, typ string) {
		env := keyedEnv("k0", len(envs))
		env.ID, env.Type = id, typ
		envs = append(envs, env)
	}
	add("k0-0", "test.other.v1")
	add("k0-1", "test.kept.v1") // blocks
	for i := 2; i < 60; i++ {
		add(fmt.Sprintf("k0-%d", i), "test.other.v1")
	}
	add("k0-60", "test.kept.v1")
	at := produceEnvs(t, cl, prefix+"in", envs)
	part, blockedAt, end := at["k0-1"].partition, at["k0-1"].offset, at["k0-60"].offset+1

	st := &blockingStage{blockID: "k0-1", release: make(chan struct{}), blocked: make(chan struct{}),
		order: map[string][]int{}, handled: map[string]bool{}}
	reg := pipeline.Registered{
		Name: "skip", Consumes: "in", Produces: []string{"out"}, Concurrency: 8, Types: []string{"test.kept.v1"},
		Build: func(context.Context, pipeline.Resources) (pipeline.Stage, error) { return st, nil },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipeline.Run(ctx, keyedRunConfig(brokers, prefix, &recPublisher{}, reg)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	select {
	case <-st.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked envelope was never handled")
	}
	// The record before it commits; nothing after it does while it is
	// blocked, though every passed-over record behind it was read.
	committed := func() int64 { return committedOffsets(t, cl, pipeline.GroupID("skip"), prefix+"in")[part] }
	if !poll(5*time.Second, func() bool { return committed() == blockedAt }) {
		t.Fatalf("committed %d on partition %d while k0-1 (offset %d) is blocked, want exactly %d", committed(), part, blockedAt, blockedAt)
	}
	for range 10 { // several commit intervals (100 ms)
		time.Sleep(100 * time.Millisecond)
		if c := committed(); c != blockedAt {
			t.Fatalf("committed %d on partition %d past the blocked envelope at %d", c, part, blockedAt)
		}
	}
	close(st.release)
	if !poll(10*time.Second, func() bool { return committed() == end }) {
		t.Fatalf("after the release committed %d, want the end %d", committed(), end)
	}
	if !poll(5*time.Second, func() bool { return st.count() == 2 }) {
		t.Fatalf("handled %d envelopes, want the two kept ones", st.count())
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.handled["k0-1"] || !st.handled["k0-60"] || len(st.handled) != 2 {
		t.Fatalf("handled %v, want k0-1 and k0-60 only", st.handled)
	}
}
