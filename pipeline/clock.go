package pipeline

import "time"

// Clock tells the time. Every part of the journey path that reads the
// time (the journey engine's waits, the journey store's stamps, matching's
// starts and conversions, the durable timers in sinks/timers) reads it
// from Resources.Clock, so a test can move time forward for all of them
// at once. Resources.Clock nil is the real clock; only tests inject one.
type Clock interface {
	Now() time.Time
}

// SystemClock is the real clock (time.Now).
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// ClockOrSystem returns r.Clock, or SystemClock when none was injected.
func (r Resources) ClockOrSystem() Clock {
	if r.Clock == nil {
		return SystemClock{}
	}
	return r.Clock
}
