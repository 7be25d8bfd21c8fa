package relayloop

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

func TestWaitDoublesAfterFailuresUpToTheCap(t *testing.T) {
	cfg := Config{Interval: 100 * time.Millisecond, MaxBackoff: time.Second}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	for failures, w := range want {
		if got := Wait(cfg, failures); got != w {
			t.Errorf("Wait after %d failures = %s, want %s", failures, got, w)
		}
	}
	if got := Wait(cfg, 1000); got != time.Second {
		t.Errorf("Wait after 1000 failures = %s, want the cap", got)
	}
	if got := Wait(Config{Interval: time.Minute}, 3); got != time.Minute {
		t.Errorf("a cap below the interval: %s, want the interval", got)
	}
	if got := Wait(Config{Interval: time.Second}, 10); got != DefaultMaxBackoff {
		t.Errorf("no cap: %s, want DefaultMaxBackoff", got)
	}
	// 18 s·2^30 does not fit a Duration: the shift wrapped to about 28
	// years, under this cap, before the comparison was made without it.
	long := Config{Interval: 18 * time.Second, MaxBackoff: 100 * 365 * 24 * time.Hour}
	if got := Wait(long, 30); got != long.MaxBackoff {
		t.Errorf("past the range of a shift: %s, want the cap", got)
	}
}

// TestRunGoesAgainOnAFullBatchAndStopsWithTheContext: rounds that fill
// the batch are followed at once by another; a failed round is retried;
// Run returns when ctx ends.
func TestRunGoesAgainOnAFullBatchAndStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	results := []struct {
		n   int
		err error
	}{{5, nil}, {5, nil}, {1, nil}, {0, errors.New("broker down")}, {5, nil}, {0, nil}}
	var calls int
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Config{Name: "test relay", Batch: 5, Interval: time.Millisecond, Logger: slog.New(slog.DiscardHandler)},
			func(context.Context) (int, error) {
				r := results[min(calls, len(results)-1)]
				calls++
				if calls == len(results) {
					cancel()
				}
				return r.n, r.err
			})
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context ended")
	}
	if calls != len(results) {
		t.Errorf("%d rounds, want %d (one per scripted result, then the context ended)", calls, len(results))
	}
}
