package pipeline

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sendstream/schemas"
)

// TestRunTypesPassesOverOtherTypes: a stage that declares Types is handed
// only envelopes of those types; the others count as finished without a
// Handle, so the committed offsets pass every record, in the serial loop
// and in the keyed one.
func TestRunTypesPassesOverOtherTypes(t *testing.T) {
	for _, conc := range []int{0, 8} {
		t.Run(fmt.Sprintf("concurrency %d", conc), func(t *testing.T) {
			st := newRecorder()
			name := fmt.Sprintf("types%d", conc)
			reg := registered(name, st)
			reg.Types, reg.Concurrency = []string{"test.kept.v1"}, conc
			envs := make([]schemas.Envelope, 200)
			for i := range envs {
				envs[i] = testEnv(fmt.Sprintf("key%d", i%5), i)
				if i%4 == 0 {
					envs[i].Type = "test.kept.v1"
				}
			}
			brokers := startAndPublish(t, reg, envs)
			// The group exists once a kept envelope was handled; only then
			// can its offsets be read.
			waitFor(t, "the kept envelopes", 15*time.Second, func() bool {
				for i := 0; i < len(envs); i += 4 {
					if st.times(envs[i].ID) == 0 {
						return false
					}
				}
				return true
			})
			waitFor(t, "commits past every record", 15*time.Second, func() bool { return totalCommitted(t, brokers, name) == 200 })
			for _, e := range envs {
				want := 0
				if e.Type == "test.kept.v1" {
					want = 1
				}
				if got := st.times(e.ID); got != want {
					t.Errorf("%s (%s) handled %d times, want %d", e.ID, e.Type, got, want)
				}
			}
		})
	}
}

// ignoringRecorder is a recorder that, as a pipeline.Ignorer, ignores the
// envelopes whose key is "skip".
type ignoringRecorder struct {
	*recorder
	asked atomic.Int32
}

func (r *ignoringRecorder) Ignores(env *schemas.Envelope) bool {
	r.asked.Add(1)
	return env.Key == "skip"
}

// TestRunIgnorerPassesOverWhatItIgnores: the envelopes a stage's Ignores
// reports it would do nothing with never reach Handle, yet count as
// finished, so the committed offsets pass every record, in the serial loop
// and in the keyed one; the others are handled once each.
func TestRunIgnorerPassesOverWhatItIgnores(t *testing.T) {
	for _, conc := range []int{0, 8} {
		t.Run(fmt.Sprintf("concurrency %d", conc), func(t *testing.T) {
			st := &ignoringRecorder{recorder: newRecorder()}
			name := fmt.Sprintf("ignorer%d", conc)
			reg := registered(name, st)
			reg.Concurrency = conc
			envs := make([]schemas.Envelope, 120)
			for i := range envs {
				envs[i] = testEnv(fmt.Sprintf("key%d", i%3), i)
				if i%3 != 0 {
					envs[i].Key = "skip"
				}
			}
			brokers := startAndPublish(t, reg, envs)
			waitFor(t, "commits past every record", 15*time.Second, func() bool { return totalCommitted(t, brokers, name) == int64(len(envs)) })
			for _, e := range envs {
				want := 1
				if e.Key == "skip" {
					want = 0
				}
				if got := st.times(e.ID); got != want {
					t.Errorf("%s (key %s) handled %d times, want %d", e.ID, e.Key, got, want)
				}
			}
			if n := st.asked.Load(); n < int32(len(envs)) {
				t.Errorf("Ignores asked %d times for %d envelopes", n, len(envs))
			}
		})
	}
}

// kindIgnoringRecorder is a recorder that, as a pipeline.KindIgnorer,
// ignores workspace "ws-skip" by the record headers, and counts the
// envelopes it was asked about after a decode.
type kindIgnoringRecorder struct {
	*recorder
	mu      sync.Mutex
	kinds   map[string]int // "type/workspace" asked of IgnoresKind
	decoded map[string]int // envelope id → Ignores calls (each after a decode)
}

func (r *kindIgnoringRecorder) IgnoresKind(typ, ws string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kinds[typ+"/"+ws]++
	return ws == "ws-skip"
}

func (r *kindIgnoringRecorder) Ignores(env *schemas.Envelope) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decoded[env.ID]++
	return false
}

// TestRunKindIgnorerSkipsUndecoded: a KindIgnorer is asked by the type and
// workspace headers Publish writes; what it ignores is never decoded (never
// reaches Ignores) nor handled, yet is committed; the rest is decoded and
// handled once.
func TestRunKindIgnorerSkipsUndecoded(t *testing.T) {
	for _, conc := range []int{0, 8} {
		t.Run(fmt.Sprintf("concurrency %d", conc), func(t *testing.T) {
			st := &kindIgnoringRecorder{recorder: newRecorder(), kinds: map[string]int{}, decoded: map[string]int{}}
			name := fmt.Sprintf("kindignorer%d", conc)
			reg := registered(name, st)
			reg.Concurrency = conc
			envs := make([]schemas.Envelope, 120)
			for i := range envs {
				envs[i] = testEnv(fmt.Sprintf("key%d", i%3), i)
				if i%2 == 1 {
					envs[i].Workspace = "ws-skip"
				}
			}
			brokers := startAndPublish(t, reg, envs)
			waitFor(t, "commits past every record", 15*time.Second, func() bool { return totalCommitted(t, brokers, name) == int64(len(envs)) })
			st.mu.Lock()
			defer st.mu.Unlock()
			for _, e := range envs {
				handled, decoded := 1, 1
				if e.Workspace == "ws-skip" {
					handled, decoded = 0, 0
				}
				if got := st.times(e.ID); got != handled {
					t.Errorf("%s (workspace %s) handled %d times, want %d", e.ID, e.Workspace, got, handled)
				}
				if got := st.decoded[e.ID]; got != decoded {
					t.Errorf("%s (workspace %s) decoded %d times, want %d", e.ID, e.Workspace, got, decoded)
				}
			}
			if st.kinds["test.created.v1/ws1"] != 60 || st.kinds["test.created.v1/ws-skip"] != 60 {
				t.Errorf("IgnoresKind asked %v, want 60 of each workspace", st.kinds)
			}
		})
	}
}

// startAndPublish runs reg on a fresh cluster, publishes envs to its input
// topic and returns the cluster's brokers.
func startAndPublish(t *testing.T, reg Registered, envs []schemas.Envelope) []string {
	t.Helper()
	brokers, p := runnerCluster(t)
	startRun(t, testRunConfig(brokers, p, reg))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Publish(ctx, tIn, envs...); err != nil {
		t.Fatal(err)
	}
	return brokers
}
