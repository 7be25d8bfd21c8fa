package webhookfanout

import (
	"context"
	"sync"
	"time"

	"sendstream/sinks/webhook"
)

// TargetTTL is how long the registered fan-out stages reuse a workspace's
// targets for one event: every contact, event and message envelope asks,
// almost always to hear "none", and one lookup per envelope per target
// kind was a Postgres query for every domain event. A new subscription or
// endpoint thus receives events within TargetTTL of its creation; a deleted
// or disabled one is refused by the delivery stage, which looks its target
// up again before each attempt.
const TargetTTL = time.Second

// maxCachedTargets bounds the cache's entries (workspace and event pairs);
// when full it starts again empty.
const maxCachedTargets = 100_000

// cachedSource is a Source whose answers are reused for ttl.
type cachedSource struct {
	src Source
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[string]cachedTargets
}

type cachedTargets struct {
	hooks []webhook.Hook
	at    time.Time
}

// cached wraps src so that its answers are reused for ttl.
func cached(src Source, ttl time.Duration) *cachedSource {
	return &cachedSource{src: src, ttl: ttl, now: time.Now, m: map[string]cachedTargets{}}
}

// Matching returns the targets of ws for event, from the cache when they
// were looked up less than ttl ago. Concurrent misses may each query.
func (c *cachedSource) Matching(ctx context.Context, ws, event string) ([]webhook.Hook, error) {
	key := ws + "\x00" + event
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e.hooks, nil
	}
	hooks, err := c.src.Matching(ctx, ws, event)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) >= maxCachedTargets {
		clear(c.m)
	}
	c.m[key] = cachedTargets{hooks: hooks, at: now}
	c.mu.Unlock()
	return hooks, nil
}
