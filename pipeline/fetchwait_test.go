package pipeline

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStageFetchWaitOverridesTheRunners: a stage's Spec.FetchMaxWait and
// FetchMinBytes reach its consumer client, a stage with FetchMinBytes alone
// waits BatchFetchWait (not the long idle poll), and a stage without them
// gets the runner's MaxWait and fetches from one byte.
func TestStageFetchWaitOverridesTheRunners(t *testing.T) {
	cfg := &RunConfig{Brokers: []string{"127.0.0.1:1"}}
	cfg.withDefaults()
	if cfg.MaxWait <= BatchFetchWait {
		t.Fatalf("default MaxWait %v: want an idle poll longer than BatchFetchWait", cfg.MaxWait)
	}
	for _, tc := range []struct {
		name     string
		reg      Registered
		wait     time.Duration
		minBytes int32
	}{
		{"runner's", Registered{Name: "plain"}, cfg.MaxWait, 1},
		{"batch", Registered{Name: "batch", FetchMinBytes: BatchFetchBytes}, BatchFetchWait, BatchFetchBytes},
		{"busy", Registered{Name: "busy", FetchMinBytes: BusyFetchBytes, FetchMaxWait: BusyFetchWait}, BusyFetchWait, BusyFetchBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &stageRunner{cfg: cfg, reg: tc.reg, topic: "t", log: cfg.Logger}
			cl, err := s.newClient()
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if got := cl.OptValue(kgo.FetchMaxWait); got != tc.wait {
				t.Errorf("FetchMaxWait = %v, want %v", got, tc.wait)
			}
			if got := cl.OptValue(kgo.FetchMinBytes); got != tc.minBytes {
				t.Errorf("FetchMinBytes = %v, want %v", got, tc.minBytes)
			}
		})
	}
}
