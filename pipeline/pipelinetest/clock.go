package pipelinetest

import (
	"sync"
	"time"
)

// Clock is a pipeline.Clock for tests: the real time plus an offset that
// Advance moves forward. It runs on like the real clock between advances,
// so times it stamps stay in order with times the rest of the system
// stamps (event receipt, contact creation) by the real clock. Safe for
// concurrent use.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the real time plus the offset.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}
