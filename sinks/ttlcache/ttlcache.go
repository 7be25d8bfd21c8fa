// Package ttlcache reuses the answers of lookups for a short time: the
// webhook stages' targets, journey matching's journeys and workspaces, the
// transactional Mailer's workspace names. Each user says how stale an
// answer may be (its TTL) where it creates its cache.
package ttlcache

import (
	"context"
	"sync"
	"time"
)

// maxCached bounds a Cache's entries; when full it starts again empty.
const maxCached = 100_000

// Cache reuses the answers of a lookup for a time (its TTL). Errors are
// not cached. Concurrent misses of one key may each load. Safe for concurrent use; the zero value is not usable (NewCache).
type Cache[V any] struct {
	ttl time.Duration
	// Now is the clock (default time.Now); set before first use.
	Now func() time.Time

	mu sync.Mutex
	m  map[string]cached[V]
}

type cached[V any] struct {
	v  V
	at time.Time
}

// NewCache returns a Cache whose entries live for ttl.
func NewCache[V any](ttl time.Duration) *Cache[V] {
	return &Cache[V]{ttl: ttl, Now: time.Now, m: map[string]cached[V]{}}
}

// Get returns key's value, from the cache when it was loaded less than
// the TTL ago, else from load (kept when load succeeds).
func (c *Cache[V]) Get(ctx context.Context, key string, load func(ctx context.Context) (V, error)) (V, error) {
	now := c.Now()
	if v, ok := c.fresh(key, now); ok {
		return v, nil
	}
	v, err := load(ctx)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if len(c.m) >= maxCached {
		clear(c.m)
	}
	c.m[key] = cached[V]{v: v, at: now}
	c.mu.Unlock()
	return v, nil
}

// Peek returns key's value when it was loaded less than the TTL ago,
// without loading: ok is false otherwise.
func (c *Cache[V]) Peek(key string) (v V, ok bool) {
	return c.fresh(key, c.Now())
}

// fresh returns key's value when it was loaded less than the TTL before now.
func (c *Cache[V]) fresh(key string, now time.Time) (v V, ok bool) {
	c.mu.Lock()
	e, found := c.m[key]
	c.mu.Unlock()
	if !found || now.Sub(e.at) >= c.ttl {
		return v, false
	}
	return e.v, true
}

// Forget drops key's entry: the next Get loads it.
func (c *Cache[V]) Forget(key string) {
	c.mu.Lock()
	delete(c.m, key)
	c.mu.Unlock()
}
