package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeDB is an in-memory Claimer with Postgres' semantics: claims on one
// window are serialised and each sees the exact total.
type fakeDB struct {
	mu     sync.Mutex
	used   map[string]int64
	claims atomic.Int64
}

func (f *fakeDB) Claim(_ context.Context, ws, ep string, w, n int64) (int64, error) {
	f.claims.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.used == nil {
		f.used = map[string]int64{}
	}
	k := ws + "|" + ep + "|" + string(rune(w))
	f.used[k] += n
	return f.used[k], nil
}

func (f *fakeDB) Sweep(context.Context, int64) error { return nil }

func TestExactAcrossLimiters(t *testing.T) {
	for _, limit := range []int64{1, 60, 1999, 2000, 50000} {
		db := &fakeDB{}
		now := func() time.Time { return time.Unix(6000, 0) }
		a, b := NewWith(db, Options{Now: now}), NewWith(db, Options{Now: now})
		var granted atomic.Int64
		var wg sync.WaitGroup
		calls := limit + limit/2 + 10
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int64(g); i < calls; i += 8 {
					l := a
					if i%2 == 1 {
						l = b
					}
					ok, err := l.Allow(context.Background(), "ws", "GET /x", limit)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						granted.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		// With leases, each limiter may strand at most one lease unused.
		lease := int64(0)
		if limit >= 2000 {
			lease = limit / 200
		}
		if g := granted.Load(); g > limit || g < limit-2*lease {
			t.Fatalf("limit %d: granted %d (want %d..%d)", limit, g, limit-2*lease, limit)
		}
		if limit >= 2000 && db.claims.Load() > 2*(calls/(limit/200)+4) {
			t.Fatalf("limit %d: %d claims; leases should keep them near calls/lease", limit, db.claims.Load())
		}
	}
}

func TestSixtyFirstCallRefusedAndWindowResets(t *testing.T) {
	db := &fakeDB{}
	var sec atomic.Int64
	sec.Store(60 * 1000)
	now := func() time.Time { return time.Unix(sec.Load(), 0) }
	a, b := NewWith(db, Options{Now: now}), NewWith(db, Options{Now: now})
	for i := 0; i < 60; i++ {
		l := []*Limiter{a, b}[i%2]
		if ok, _ := l.Allow(context.Background(), "ws", "e", 60); !ok {
			t.Fatalf("call %d refused", i+1)
		}
	}
	for _, l := range []*Limiter{a, b} {
		if ok, _ := l.Allow(context.Background(), "ws", "e", 60); ok {
			t.Fatal("61st call allowed")
		}
	}
	if ok, _ := a.Allow(context.Background(), "other-ws", "e", 60); !ok {
		t.Fatal("another workspace shares the counter")
	}
	if ok, _ := a.Allow(context.Background(), "ws", "other-endpoint", 60); !ok {
		t.Fatal("another endpoint shares the counter")
	}
	claims := db.claims.Load()
	for i := 0; i < 100; i++ {
		a.Allow(context.Background(), "ws", "e", 60)
	}
	if db.claims.Load() != claims {
		t.Fatal("an exhausted window still claims from the store")
	}
	sec.Add(60)
	if ok, _ := a.Allow(context.Background(), "ws", "e", 60); !ok {
		t.Fatal("next minute still refused")
	}
}

func BenchmarkAllowLeased(b *testing.B) {
	db := &fakeDB{}
	l := NewWith(db, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Allow(ctx, "ws", "GET /api/v1/me", 1<<40)
		}
	})
}
