package webhookdelivery

import (
	"testing"
	"time"
)

// TestDeferralsSpacedByHangingCalls: a target whose calls all hang has no
// finished call to average; its deferrals are still spaced by the age of
// its oldest call in flight over the slots, not all sent back at min.
func TestDeferralsSpacedByHangingCalls(t *testing.T) {
	l := newLimiter(4)
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for i := range 4 {
		if !l.acquire("ws:ep", t0.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("slot %d refused", i)
		}
	}
	if l.acquire("ws:ep", t0) {
		t.Fatal("a fifth call took a slot of four")
	}
	now := t0.Add(20 * time.Second) // the oldest call has hung for 20 s
	first := l.deferUntil("ws:ep", now, 5*time.Second)
	second := l.deferUntil("ws:ep", now, 5*time.Second)
	if want := now.Add(5 * time.Second); !first.Equal(want) {
		t.Errorf("first deferral at %s, want %s (min)", first, want)
	}
	if got, want := second.Sub(first), 5*time.Second; got != want { // 20 s / 4 slots
		t.Errorf("deferrals %s apart, want %s (oldest call's age / slots)", got, want)
	}
	// A finished call frees its slot; the average then counts it.
	l.release("ws:ep", t0, now)
	if !l.acquire("ws:ep", now) {
		t.Error("a released slot was not free again")
	}
}
