package ttlcache

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCache: an answer is reused within the TTL and loaded again after
// it; a failed load is not kept; Forget makes the next Get load.
func TestCache(t *testing.T) {
	now := time.Unix(1_000, 0)
	c := NewCache[int](time.Second)
	c.Now = func() time.Time { return now }
	loads := 0
	load := func(context.Context) (int, error) { loads++; return loads, nil }
	get := func() int {
		t.Helper()
		v, err := c.Get(context.Background(), "k", load)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := get(); v != 1 {
		t.Fatalf("first get: %d", v)
	}
	now = now.Add(999 * time.Millisecond)
	if v := get(); v != 1 || loads != 1 {
		t.Fatalf("within the TTL: %d after %d loads, want the cached 1", v, loads)
	}
	now = now.Add(time.Millisecond)
	if v := get(); v != 2 {
		t.Fatalf("at the TTL: %d, want a new load", v)
	}
	c.Forget("k")
	if v := get(); v != 3 {
		t.Fatalf("after Forget: %d, want a new load", v)
	}
	boom := errors.New("boom")
	if _, err := c.Get(context.Background(), "e", func(context.Context) (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("failed load: %v", err)
	}
	if v, _ := c.Get(context.Background(), "e", func(context.Context) (int, error) { return 7, nil }); v != 7 {
		t.Fatalf("after a failed load: %d, want a new load", v)
	}
}

// TestCachePeek: Peek answers only what Get loaded within the TTL, and
// never loads.
func TestCachePeek(t *testing.T) {
	now := time.Unix(1_000, 0)
	c := NewCache[int](time.Second)
	c.Now = func() time.Time { return now }
	if v, ok := c.Peek("k"); ok {
		t.Fatalf("Peek before any Get: %d, true", v)
	}
	if _, err := c.Get(context.Background(), "k", func(context.Context) (int, error) { return 5, nil }); err != nil {
		t.Fatal(err)
	}
	now = now.Add(999 * time.Millisecond)
	if v, ok := c.Peek("k"); !ok || v != 5 {
		t.Fatalf("Peek within the TTL: %d, %v; want 5, true", v, ok)
	}
	now = now.Add(time.Millisecond)
	if v, ok := c.Peek("k"); ok {
		t.Fatalf("Peek at the TTL: %d, true; want nothing", v)
	}
}
