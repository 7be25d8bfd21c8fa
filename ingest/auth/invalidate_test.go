package auth

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sendstream/deploy/stack"
)

// gatedSrc resolves like fakeSrc but, when gate is set, each Resolve reads
// its answer, reports that on started, and returns it once gate closes: a
// lookup that read Postgres before a change and answers after it.
type gatedSrc struct {
	fakeSrc
	started chan struct{}
	gate    chan struct{}
}

func (g *gatedSrc) Resolve(ctx context.Context, kind string, h [32]byte) (Identity, error) {
	id, err := g.fakeSrc.Resolve(ctx, kind, h)
	if g.gate != nil {
		g.started <- struct{}{}
		<-g.gate
	}
	return id, err
}

func TestCacheEvict(t *testing.T) {
	ctx := context.Background()
	src := &gatedSrc{fakeSrc: fakeSrc{ids: map[[32]byte]Identity{}}}
	k1, _ := newToken(APIKeyPrefix)
	k2, _ := newToken(APIKeyPrefix)
	k3, _ := newToken(APIKeyPrefix)
	src.set(k1, &Identity{KeyID: "k1", Workspace: "w1"})
	src.set(k2, &Identity{KeyID: "k2", Workspace: "w1"})
	src.set(k3, &Identity{KeyID: "k3", Workspace: "w2"})
	c := NewCache(src, CacheConfig{TTL: time.Hour})
	unknown, _ := newToken(APIKeyPrefix)
	warm := func() {
		t.Helper()
		for _, k := range []string{k1, k2, k3} {
			if _, err := c.Authenticate(ctx, []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Authenticate(ctx, []byte(unknown)); !errors.Is(err, ErrUnknown) {
			t.Fatal(err)
		}
	}
	// lookups counts the Resolve calls that authenticating keys makes.
	lookups := func(keys ...string) int64 {
		t.Helper()
		before := src.calls.Load()
		for _, k := range keys {
			_, _ = c.Authenticate(ctx, []byte(k))
		}
		return src.calls.Load() - before
	}
	warm()
	if n := lookups(k1, k2, k3, unknown); n != 0 {
		t.Fatalf("warm cache made %d lookups", n)
	}

	c.Evict(CredentialChanged("k1"))
	if n := lookups(k1); n != 1 {
		t.Fatalf("k1 after its eviction: %d lookups, want 1", n)
	}
	if n := lookups(k2, k3, unknown); n != 0 {
		t.Fatalf("evicting k1 dropped others: %d lookups", n)
	}

	c.Evict(WorkspaceChanged("w1"))
	if n := lookups(k1, k2); n != 2 {
		t.Fatalf("w1's keys after its eviction: %d lookups, want 2", n)
	}
	if n := lookups(k3, unknown); n != 0 {
		t.Fatalf("evicting w1 dropped w2's key or the unknown one: %d lookups", n)
	}

	c.Evict(Change{Kind: ChangeAll})
	if n := lookups(k1, k2, k3, unknown); n != 4 {
		t.Fatalf("after ChangeAll: %d lookups, want 4", n)
	}

	// A lookup that read the old state before an eviction answers with it
	// but does not cache it; a call made after the eviction does not join
	// it and reads the new state.
	c.Evict(Change{Kind: ChangeAll})
	src.started, src.gate = make(chan struct{}, 2), make(chan struct{})
	var wg sync.WaitGroup
	var before, after atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := c.Authenticate(ctx, []byte(k1))
		before.Store(errBox{err})
	}()
	<-src.started // read k1 as valid
	src.set(k1, nil)
	c.Evict(CredentialChanged("k1"))
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := c.Authenticate(ctx, []byte(k1))
		after.Store(errBox{err})
	}()
	select {
	case <-src.started: // a lookup of its own, not joined to the first
	case <-time.After(10 * time.Second):
		t.Fatal("the call after the eviction joined the lookup begun before it")
	}
	close(src.gate)
	wg.Wait()
	src.gate = nil
	if e := before.Load().(errBox); e.err != nil {
		t.Fatalf("lookup begun before the deletion: %v, want its (old) answer", e.err)
	}
	if e := after.Load().(errBox); !errors.Is(e.err, ErrUnknown) {
		t.Fatalf("call after the eviction: %v, want ErrUnknown", e.err)
	}
	h := Hash(k1)
	sh := &c.shards[h[0]%cacheShards]
	sh.mu.RLock()
	_, stale := sh.pos[h]
	sh.mu.RUnlock()
	if stale {
		t.Fatal("the answer read before the eviction was cached after it")
	}
	if _, err := c.Authenticate(ctx, []byte(k1)); !errors.Is(err, ErrUnknown) {
		t.Fatalf("deleted key after both lookups: %v", err)
	}
}

type errBox struct{ err error }

func TestChangePayloads(t *testing.T) {
	for _, c := range []Change{CredentialChanged("a1"), WorkspaceChanged("w:1"), {Kind: ChangeAll}} {
		got, ok := parseChange(c.String())
		if !ok || got != c {
			t.Errorf("%q read back as %+v (%v)", c.String(), got, ok)
		}
	}
	for _, p := range []string{"", "credential:", "workspace", "key:1", "ss_live_x"} {
		if got, ok := parseChange(p); ok || got.Kind != ChangeAll {
			t.Errorf("%q: %+v %v, want an unknown payload read as ChangeAll", p, got, ok)
		}
	}
	if err := Invalidate(context.Background(), nil, Change{Kind: ChangeCredential}); err == nil {
		t.Error("a change without an id was sent")
	}
}

// recorder keeps the changes a Listener hands on.
type recorder struct {
	mu  sync.Mutex
	got []Change
}

func (r *recorder) add(c Change) { r.mu.Lock(); r.got = append(r.got, c); r.mu.Unlock() }

func (r *recorder) count(kind ChangeKind, id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.got {
		if c.Kind == kind && c.ID == id {
			n++
		}
	}
	return n
}

// eventually polls cond every few milliseconds for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// startListener runs a Listener on a pool of the test stack until the
// test ends and waits until it listens.
func startListener(t *testing.T, c *Cache, rec *recorder) (*Store, *Listener) {
	t.Helper()
	pg := stack.PG(t)
	l := NewListener(pg, nil)
	l.Subscribe(c.Evict)
	l.Subscribe(rec.add)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := l.WaitListening(wctx); err != nil {
		t.Fatal(err)
	}
	return NewStore(pg), l
}

// TestListenerEvictsWhatPostgresAnnounces: deleting a key, suspending and
// resuming a workspace (the triggers of migration 0075) and Invalidate
// each reach the cache through Postgres, while other entries stay cached.
func TestListenerEvictsWhatPostgresAnnounces(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	s0 := NewStore(stack.PG(t))
	c := NewCache(s0, CacheConfig{TTL: time.Hour})
	s, _ := startListener(t, c, rec)
	ws, key, err := s.CreateWorkspace(ctx, NewWorkspace{Name: "invalidation"})
	if err != nil {
		t.Fatal(err)
	}
	delID, del, err := s.CreateAPIKey(ctx, ws, "to delete", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := s.CreateTrackingToken(ctx, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws2, key2, err := s.CreateWorkspace(ctx, NewWorkspace{Name: "bystander"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key, del, tok, key2} {
		if _, err := c.Authenticate(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	_, misses0 := c.Stats()

	if err := s.DeleteAPIKey(ctx, ws, delID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted key refused", func() bool {
		_, err := c.Authenticate(ctx, []byte(del))
		return errors.Is(err, ErrUnknown)
	})
	if rec.count(ChangeCredential, delID) != 1 {
		t.Fatalf("heard credential:%s %d times, want once", delID, rec.count(ChangeCredential, delID))
	}
	_, misses1 := c.Stats()
	for _, k := range []string{key, tok, key2} {
		if _, err := c.Authenticate(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if _, m := c.Stats(); m != misses1 || misses1 == misses0 {
		t.Fatalf("misses %d -> %d -> %d: deleting one key must evict it and nothing else", misses0, misses1, m)
	}

	suspended := func(k string) bool {
		id, err := c.Authenticate(ctx, []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		return id.Suspended
	}
	if err := s.SetSuspended(ctx, ws, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the key sees the suspension", func() bool { return suspended(key) })
	eventually(t, "the tracking token sees the suspension", func() bool { return suspended(tok) })
	if suspended(key2) {
		t.Fatal("another workspace's key suspended")
	}
	if err := s.SetSuspended(ctx, ws, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the key sees the resumption", func() bool { return !suspended(key) })
	if n := rec.count(ChangeWorkspace, ws); n != 2 {
		t.Fatalf("heard workspace:%s %d times, want 2 (suspend, resume)", ws, n)
	}
	if n := rec.count(ChangeWorkspace, ws2); n != 0 {
		t.Fatalf("the bystander workspace announced %d times", n)
	}

	// auth.Invalidate, as a credential kind without a trigger calls it: in
	// a transaction, heard when it commits and not before.
	_, m := c.Stats()
	tx, err := s0.pg.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := Invalidate(ctx, tx, WorkspaceChanged(ws2)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := rec.count(ChangeWorkspace, ws2); n != 0 {
		t.Fatal("heard before the commit")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Invalidate heard", func() bool { return rec.count(ChangeWorkspace, ws2) == 1 })
	if _, err := c.Authenticate(ctx, []byte(key2)); err != nil {
		t.Fatal(err)
	}
	if _, m2 := c.Stats(); m2 != m+1 {
		t.Fatalf("key of the invalidated workspace still cached (misses %d -> %d)", m, m2)
	}
}

// TestListenerReconnectsAndDropsTheCache: when the listening connection
// is killed, the listener reconnects and drops every cached credential,
// since notifications sent meanwhile were lost.
func TestListenerReconnectsAndDropsTheCache(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	pg := stack.PG(t)
	c := NewCache(NewStore(pg), CacheConfig{TTL: time.Hour})
	s, l := startListener(t, c, rec)
	_, key, err := s.CreateWorkspace(ctx, NewWorkspace{Name: "reconnect"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Authenticate(ctx, []byte(key)); err != nil {
		t.Fatal(err)
	}
	alls := rec.count(ChangeAll, "")
	pid := l.pid.Load()
	var killed bool
	if err := pg.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the listener's backend %d: %v %v", pid, killed, err)
	}
	eventually(t, "the listener reconnected", func() bool {
		return l.Listening() && l.pid.Load() != pid && rec.count(ChangeAll, "") > alls
	})
	_, m := c.Stats()
	if _, err := c.Authenticate(ctx, []byte(key)); err != nil {
		t.Fatal(err)
	}
	if _, m2 := c.Stats(); m2 != m+1 {
		t.Fatal("the cache was not dropped on reconnection")
	}
	// And it hears changes again on the new connection.
	if err := Invalidate(ctx, pg, CredentialChanged("after-reconnect")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a change heard after reconnecting", func() bool { return rec.count(ChangeCredential, "after-reconnect") == 1 })
}
