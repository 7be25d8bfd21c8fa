package pipeline

import (
	"testing"
	"time"
)

// TestReopenAfterStartsAgainOnceARunRecovered: failures in a row double
// the wait up to max; a reader that ran for max or longer before it failed
// waits base again, however many disruptions came before.
func TestReopenAfterStartsAgainOnceARunRecovered(t *testing.T) {
	const base, max = 100 * time.Millisecond, time.Second
	failures := 0
	var wait time.Duration
	for i, want := range []time.Duration{base, 2 * base, 4 * base, 8 * base, max, max} {
		failures, wait = reopenAfter(failures, time.Millisecond, base, max)
		if wait != want {
			t.Fatalf("failure %d in a row: wait %v, want %v", i+1, wait, want)
		}
	}
	failures, wait = reopenAfter(failures, max, base, max)
	if wait != base || failures != 1 {
		t.Fatalf("after a reader that ran for max: wait %v and %d failures, want %v and 1", wait, failures, base)
	}
	if _, wait = reopenAfter(failures, max-time.Millisecond, base, max); wait != 2*base {
		t.Fatalf("a quick failure after it: wait %v, want %v", wait, 2*base)
	}
}
