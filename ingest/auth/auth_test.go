package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

type fakeSrc struct {
	mu    sync.Mutex
	ids   map[[32]byte]Identity
	calls atomic.Int64
	delay time.Duration
}

func (f *fakeSrc) Resolve(_ context.Context, kind string, h [32]byte) (Identity, error) {
	f.calls.Add(1)
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.ids[h]
	if !ok {
		return Identity{}, ErrUnknown
	}
	return id, nil
}

func (f *fakeSrc) set(tok string, id *Identity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id == nil {
		delete(f.ids, Hash(tok))
		return
	}
	f.ids[Hash(tok)] = *id
}

func TestTokensAndKinds(t *testing.T) {
	k, err := newToken(APIKeyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(k) != len(APIKeyPrefix)+40 || kindOf([]byte(k)) != KindAPIKey {
		t.Fatalf("bad key %q", k)
	}
	tr, _ := newToken(TrackingTokenPrefix)
	if kindOf([]byte(tr)) != KindTrackingToken {
		t.Fatalf("bad tracking token %q", tr)
	}
	for _, bad := range []string{"", "ss_live_", k[:len(k)-1], k + "x", "ss_live_" + "!" + k[9:], "sk_live_" + k[8:]} {
		if kindOf([]byte(bad)) != "" {
			t.Errorf("%q accepted as well-formed", bad)
		}
	}
	if h := hint(k); h != "ss_live_…"+k[len(k)-4:] {
		t.Errorf("hint %q", h)
	}
}

func TestCache(t *testing.T) {
	key, _ := newToken(APIKeyPrefix)
	src := &fakeSrc{ids: map[[32]byte]Identity{}}
	src.set(key, &Identity{KeyID: "k1", Workspace: "w1", RateMultiplier: 1})
	c := NewCache(src, CacheConfig{TTL: 200 * time.Millisecond})
	ctx := context.Background()

	if _, err := c.Authenticate(ctx, []byte("garbage")); !errors.Is(err, ErrMalformed) || src.calls.Load() != 0 {
		t.Fatalf("malformed: err %v, %d lookups", err, src.calls.Load())
	}
	for i := 0; i < 100; i++ {
		id, err := c.Authenticate(ctx, []byte(key))
		if err != nil || id.KeyID != "k1" {
			t.Fatalf("valid key: %v %+v", err, id)
		}
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("%d lookups for 100 calls; want 1", n)
	}
	// Deleted: still valid from cache until the TTL, then 401.
	src.set(key, nil)
	if _, err := c.Authenticate(ctx, []byte(key)); err != nil {
		t.Fatalf("within TTL: %v", err)
	}
	time.Sleep(250 * time.Millisecond)
	if _, err := c.Authenticate(ctx, []byte(key)); !errors.Is(err, ErrUnknown) {
		t.Fatalf("after TTL: %v, want ErrUnknown", err)
	}

	// Expiry is checked on every call against the cached value.
	exp, _ := newToken(APIKeyPrefix)
	src.set(exp, &Identity{KeyID: "k2", ExpiresAt: time.Now().Add(100 * time.Millisecond)})
	if _, err := c.Authenticate(ctx, []byte(exp)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(120 * time.Millisecond)
	if _, err := c.Authenticate(ctx, []byte(exp)); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired key: %v", err)
	}
}

func TestCacheUnknownBurstAndBound(t *testing.T) {
	src := &fakeSrc{ids: map[[32]byte]Identity{}, delay: 20 * time.Millisecond}
	c := NewCache(src, CacheConfig{TTL: time.Minute, MaxNegative: 64})
	ctx := context.Background()
	unknown, _ := newToken(APIKeyPrefix)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Authenticate(ctx, []byte(unknown)); !errors.Is(err, ErrUnknown) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("a burst of one unknown key made %d lookups; want 1", n)
	}
	if _, err := c.Authenticate(ctx, []byte(unknown)); !errors.Is(err, ErrUnknown) || src.calls.Load() != 1 {
		t.Fatal("unknown key not cached")
	}
	src.delay = 0
	for i := 0; i < 1000; i++ {
		k, _ := newToken(APIKeyPrefix)
		_, _ = c.Authenticate(ctx, []byte(k))
	}
	total := 0
	for i := range c.shards {
		total += len(c.shards[i].neg)
	}
	if total > 64 {
		t.Fatalf("%d negative entries cached; bound is 64", total)
	}
}

func TestPassword(t *testing.T) {
	h, err := HashPassword("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !VerifyPassword(h, "correct horse") || VerifyPassword(h, "wrong horse") {
		t.Fatal("password verification wrong")
	}
}

func BenchmarkAuthenticateHit(b *testing.B) {
	key, _ := newToken(APIKeyPrefix)
	src := &fakeSrc{ids: map[[32]byte]Identity{}}
	src.set(key, &Identity{KeyID: "k1"})
	c := NewCache(src, CacheConfig{TTL: time.Minute})
	tok := []byte(key)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Authenticate(context.Background(), tok); err != nil {
			b.Fatal(err)
		}
	}
}

// registerRuns numbers TestRegisterKind's runs: the registry is global and
// refuses a prefix twice, so each run (-count=N) registers a new one.
var registerRuns atomic.Int32

func TestRegisterKind(t *testing.T) {
	prefix := fmt.Sprintf("ss_test%d_", registerRuns.Add(1))
	RegisterKind(ExtraKind{Prefix: prefix, Kind: "test", Resolve: func(context.Context, *pgxpool.Pool, [32]byte) (Identity, error) {
		return Identity{}, ErrUnknown
	}})
	tok, _ := newToken(prefix)
	if kindOf([]byte(tok)) != "test" {
		t.Fatalf("registered prefix not recognised: %q", tok)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate prefix accepted")
		}
	}()
	RegisterKind(ExtraKind{Prefix: APIKeyPrefix, Kind: "x", Resolve: func(context.Context, *pgxpool.Pool, [32]byte) (Identity, error) { return Identity{}, nil }})
}
