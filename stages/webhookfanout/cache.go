package webhookfanout

import (
	"context"
	"time"

	"sendstream/sinks/ttlcache"
	"sendstream/sinks/webhook"
)

// TargetTTL is how long the registered fan-out stages reuse a workspace's
// targets for one event (webhook.TargetTTL: a new subscription or endpoint
// receives events within it; a deleted or disabled one is refused by the
// delivery stage, whose own lookups are cached for as long).
const TargetTTL = webhook.TargetTTL

// cachedSource is a Source whose answers are reused for a TTL
// (ttlcache.Cache, the one the delivery stage's lookups use).
type cachedSource struct {
	src   Source
	cache *ttlcache.Cache[[]webhook.Hook]
}

// cached wraps src so that its answers are reused for ttl.
func cached(src Source, ttl time.Duration) *cachedSource {
	return &cachedSource{src: src, cache: ttlcache.NewCache[[]webhook.Hook](ttl)}
}

// Matching returns the targets of ws for event, from the cache when they
// were looked up less than the TTL ago. Concurrent misses may each query.
func (c *cachedSource) Matching(ctx context.Context, ws, event string) ([]webhook.Hook, error) {
	return c.cache.Get(ctx, ws+"\x00"+event, func(ctx context.Context) ([]webhook.Hook, error) {
		return c.src.Matching(ctx, ws, event)
	})
}

// Peek returns the cached targets of ws for event, without a lookup; ok is
// false when none were looked up within the TTL.
func (c *cachedSource) Peek(ws, event string) (hooks []webhook.Hook, ok bool) {
	return c.cache.Peek(ws + "\x00" + event)
}
