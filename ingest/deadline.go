package ingest

import (
	"context"
	"sync/atomic"
	"time"
)

// deadlines hands out request contexts without a timer per request: every
// request that starts within one tick shares one context, which ends
// timeout after that tick's end. A request therefore gets between timeout
// and timeout+tick; a context.WithTimeout per request costs a timer, a
// registration with the parent and a cancel on the hot path.
type deadlines struct {
	base    context.Context
	timeout time.Duration
	tick    time.Duration
	cur     atomic.Pointer[tickContext]
}

type tickContext struct {
	ctx    context.Context
	cancel context.CancelFunc // released by the context's own deadline; kept for vet
	until  time.Time          // requests starting before this share ctx
}

const deadlineTick = 100 * time.Millisecond

func newDeadlines(base context.Context, timeout time.Duration) *deadlines {
	return &deadlines{base: base, timeout: timeout, tick: deadlineTick}
}

// at returns the shared context for a request starting at now.
func (d *deadlines) at(now time.Time) context.Context {
	if t := d.cur.Load(); t != nil && now.Before(t.until) {
		return t.ctx
	}
	until := now.Add(d.tick)
	ctx, cancel := context.WithDeadline(d.base, until.Add(d.timeout))
	d.cur.Store(&tickContext{ctx: ctx, cancel: cancel, until: until})
	return ctx
}
