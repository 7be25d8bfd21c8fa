package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Resolver looks a credential up by kind and SHA-256 hash; ErrUnknown when
// none has that hash. *Store implements it.
type Resolver interface {
	Resolve(ctx context.Context, kind string, hash [32]byte) (Identity, error)
}

var _ Resolver = (*Store)(nil)

// CacheConfig configures a Cache. Zero fields take the defaults.
type CacheConfig struct {
	// TTL bounds staleness when a change is not heard: a change announced
	// on Channel takes effect as soon as a Listener hands it to Evict
	// (milliseconds); without a Listener, or while it reconnects, a deleted
	// key, a suspension or a changed expiry takes effect within TTL.
	// Negative disables caching (every call resolves). Default 5s.
	TTL time.Duration
	// MaxEntries bounds cached valid credentials (default 65536).
	MaxEntries int
	// MaxNegative bounds cached unknown credentials (default 16384), so random
	// keys can neither grow memory nor hammer Postgres.
	MaxNegative int
	// ResolveTimeout bounds one Postgres lookup (default 5s).
	ResolveTimeout time.Duration
}

const cacheShards = 32

// Cache resolves presented credentials to Identities through a Resolver,
// caching valid and unknown credentials for TTL. Concurrent misses on the
// same credential share one lookup. Expiry is checked on every call against
// the cached expiry. Safe for concurrent use; Authenticate allocates nothing
// on a hit. Evict drops entries when a Listener hears of a change.
type Cache struct {
	src    Resolver
	ttl    time.Duration
	maxPos int // per shard
	maxNeg int // per shard
	tmo    time.Duration
	sf     singleflight.Group
	shards [cacheShards]cacheShard

	hits, misses atomic.Uint64
	// epoch counts evictions. A lookup keeps its result only when no
	// eviction happened since it began, so an answer read from Postgres
	// before a change committed is never cached after the change was heard.
	epoch atomic.Uint64
}

type cacheShard struct {
	mu  sync.RWMutex
	pos map[[32]byte]posEntry
	neg map[[32]byte]int64 // unix nanos until which the credential is known unknown
}

type posEntry struct {
	id    *Identity
	until int64 // unix nanos
}

// NewCache returns a Cache over src.
func NewCache(src Resolver, cfg CacheConfig) *Cache {
	if cfg.TTL == 0 {
		cfg.TTL = 5 * time.Second
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 65536
	}
	if cfg.MaxNegative <= 0 {
		cfg.MaxNegative = 16384
	}
	if cfg.ResolveTimeout <= 0 {
		cfg.ResolveTimeout = 5 * time.Second
	}
	c := &Cache{
		src: src, ttl: cfg.TTL, tmo: cfg.ResolveTimeout,
		maxPos: max(1, cfg.MaxEntries/cacheShards),
		maxNeg: max(1, cfg.MaxNegative/cacheShards),
	}
	for i := range c.shards {
		c.shards[i].pos = make(map[[32]byte]posEntry)
		c.shards[i].neg = make(map[[32]byte]int64)
	}
	return c
}

// Authenticate resolves a presented credential (the part after "Bearer ").
// Errors: ErrMalformed (no lookup is made), ErrUnknown, ErrExpired (all mean
// 401), or a wrapped store error (the caller answers 503). The returned
// Identity is shared: do not modify it.
func (c *Cache) Authenticate(ctx context.Context, token []byte) (*Identity, error) {
	return c.AuthenticateAt(ctx, token, time.Now())
}

// AuthenticateAt is Authenticate at time now, for a caller that has read
// the clock already.
func (c *Cache) AuthenticateAt(ctx context.Context, token []byte, now time.Time) (*Identity, error) {
	kind := kindOf(token)
	if kind == "" {
		return nil, ErrMalformed
	}
	h := sha256.Sum256(token)
	id, err := c.lookup(ctx, kind, h, now.UnixNano())
	if err != nil {
		return nil, err
	}
	if !id.ExpiresAt.IsZero() && !now.Before(id.ExpiresAt) {
		return nil, ErrExpired
	}
	return id, nil
}

func (c *Cache) lookup(ctx context.Context, kind string, h [32]byte, now int64) (*Identity, error) {
	sh := &c.shards[h[0]%cacheShards]
	if c.ttl > 0 {
		sh.mu.RLock()
		e, ok := sh.pos[h]
		negUntil, negOK := sh.neg[h]
		sh.mu.RUnlock()
		if ok && now < e.until && subtle.ConstantTimeCompare(e.id.hash[:], h[:]) == 1 {
			c.hits.Add(1)
			return e.id, nil
		}
		if negOK && now < negUntil {
			c.hits.Add(1)
			return nil, ErrUnknown
		}
	}
	c.misses.Add(1)
	// Lookups that begin after an eviction never join one that began
	// before it: the epoch is part of the key.
	epoch := c.epoch.Load()
	var sfKey [40]byte
	copy(sfKey[:], h[:])
	binary.LittleEndian.PutUint64(sfKey[32:], epoch)
	v, err, _ := c.sf.Do(string(sfKey[:]), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.tmo)
		defer cancel()
		id, err := c.src.Resolve(rctx, kind, h)
		until := time.Now().Add(c.ttl).UnixNano()
		if errors.Is(err, ErrUnknown) {
			if c.ttl > 0 {
				c.putNeg(sh, h, until, epoch)
			}
			return nil, ErrUnknown
		}
		if err != nil {
			return nil, err
		}
		id.hash = h
		if id.Kind == "" {
			id.Kind = kind
		}
		if id.RateMultiplier < 1 {
			id.RateMultiplier = 1
		}
		p := &id
		if c.ttl > 0 {
			c.putPos(sh, h, p, until, epoch)
		}
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Identity), nil
}

// putPos caches a valid credential unless an eviction happened since the
// lookup began (epoch). The check is made under the shard's lock, which
// Evict takes after advancing the epoch: either the entry is stored first
// and Evict sees it, or the epoch has moved and it is not stored.
func (c *Cache) putPos(sh *cacheShard, h [32]byte, id *Identity, until int64, epoch uint64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.epoch.Load() != epoch {
		return
	}
	delete(sh.neg, h)
	if _, ok := sh.pos[h]; !ok && len(sh.pos) >= c.maxPos {
		evict(sh.pos, func(e posEntry) int64 { return e.until })
	}
	sh.pos[h] = posEntry{id: id, until: until}
}

func (c *Cache) putNeg(sh *cacheShard, h [32]byte, until int64, epoch uint64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.epoch.Load() != epoch {
		return
	}
	delete(sh.pos, h)
	if _, ok := sh.neg[h]; !ok && len(sh.neg) >= c.maxNeg {
		evict(sh.neg, func(u int64) int64 { return u })
	}
	sh.neg[h] = until
}

// evict makes room in a full shard map: it drops every expired entry, or
// when none has expired, one arbitrary entry (Go's random map order).
func evict[V any](m map[[32]byte]V, until func(V) int64) {
	now := time.Now().UnixNano()
	n := len(m)
	for k, v := range m {
		if until(v) <= now {
			delete(m, k)
		}
	}
	if len(m) < n {
		return
	}
	for k := range m {
		delete(m, k)
		return
	}
}

// Stats returns the number of cache hits (including cached unknowns) and
// misses (lookups started or joined) since the Cache was made.
func (c *Cache) Stats() (hits, misses uint64) { return c.hits.Load(), c.misses.Load() }
