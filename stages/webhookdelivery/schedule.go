package webhookdelivery

import "time"

// Schedule is the retry schedule of spec 6, the same for REST hooks and
// dashboard endpoints: Schedule[n] is the wait after a failed attempt n
// (1-based) before attempt n+1; attempt len(Schedule)+1 (the tenth) is the
// last.
var Schedule = []time.Duration{
	time.Second, 2 * time.Second, // the quick retries, run in the stage
	5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 8 * time.Hour, 8 * time.Hour, 10 * time.Hour,
}

// QuickAttempts are the attempts made within one Handle call (1 s, then 2 s
// apart): keyed concurrency lets that call wait without holding other
// targets. Later attempts are the durable part of the schedule.
const QuickAttempts = 3

// MaxAttempts is the number of counted attempts of a delivery.
var MaxAttempts = len(Schedule) + 1

// After returns the wait after a failed attempt n before attempt n+1, and
// false when attempt n was the last.
func After(n int) (time.Duration, bool) {
	if n < 1 || n > len(Schedule) {
		return 0, false
	}
	return Schedule[n-1], true
}

// throttleWait is the wait after a 429 answer to attempt n: the receiver's
// Retry-After within the schedule's bounds (no shorter than the wait the
// schedule would have after attempt n, no longer than its longest wait),
// else that wait.
func throttleWait(n int, retryAfter time.Duration) time.Duration {
	lo, ok := After(n)
	if !ok {
		lo = Schedule[len(Schedule)-1]
	}
	hi := Schedule[len(Schedule)-1]
	return min(max(retryAfter, lo), hi)
}
