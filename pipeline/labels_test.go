package pipeline

import (
	"context"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"sendstream/schemas"
)

// labelStage records the pprof "stage" label its Handle runs under.
type labelStage struct {
	mu     sync.Mutex
	labels []string
}

func (s *labelStage) Handle(ctx context.Context, _ schemas.Envelope) ([]schemas.Envelope, error) {
	v, _ := pprof.Label(ctx, "stage")
	s.mu.Lock()
	s.labels = append(s.labels, v)
	s.mu.Unlock()
	return nil, nil
}

func (s *labelStage) Close() error { return nil }

func (s *labelStage) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.labels...)
}

// Each stage runs under its own pprof label, so a CPU profile of the
// process splits by stage (README, SENDSTREAM_DEBUG_ADDR).
func TestRunLabelsEachStageForProfiles(t *testing.T) {
	brokers, p := runnerCluster(t)
	a, b := &labelStage{}, &labelStage{}
	stop := startRun(t, testRunConfig(brokers, p, registered("label-a", a), registered("label-b", b)))
	publishN(t, p, tIn, 3)
	waitFor(t, "both stages handled the envelopes", 20*time.Second, func() bool { return len(a.seen()) >= 3 && len(b.seen()) >= 3 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for name, st := range map[string]*labelStage{"label-a": a, "label-b": b} {
		for _, got := range st.seen() {
			if got != name {
				t.Fatalf("stage %s handled an envelope under the label stage=%q", name, got)
			}
		}
	}
}
