package webhookfanout

import (
	"context"
	"errors"
	"testing"
	"time"

	"sendstream/schemas"
	"sendstream/sinks/webhook"
)

// countingSource answers every lookup with its hooks and counts them.
type countingSource struct {
	hooks []webhook.Hook
	calls int
	err   error
}

func (c *countingSource) Matching(context.Context, string, string) ([]webhook.Hook, error) {
	c.calls++
	return c.hooks, c.err
}

// TestCachedSourceReusesWithinTTL: one lookup per workspace and event per
// TTL; another event or workspace, an expired entry or a failed lookup asks
// again.
func TestCachedSourceReusesWithinTTL(t *testing.T) {
	src := &countingSource{hooks: []webhook.Hook{{ID: "h1"}}}
	c := cached(src, time.Second)
	now := time.Unix(1000, 0)
	c.cache.Now = func() time.Time { return now }
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		hs, err := c.Matching(ctx, "ws1", "CONTACT_CREATED")
		if err != nil || len(hs) != 1 || hs[0].ID != "h1" {
			t.Fatalf("lookup %d: %v %v", i, hs, err)
		}
	}
	if src.calls != 1 {
		t.Fatalf("%d queries within the TTL, want 1", src.calls)
	}
	c.Matching(ctx, "ws1", "CONTACT_UPDATED") //nolint:errcheck
	c.Matching(ctx, "ws2", "CONTACT_CREATED") //nolint:errcheck
	if src.calls != 3 {
		t.Fatalf("%d queries after two other keys, want 3", src.calls)
	}
	now = now.Add(time.Second)
	c.Matching(ctx, "ws1", "CONTACT_CREATED") //nolint:errcheck
	if src.calls != 4 {
		t.Fatalf("%d queries after the TTL, want 4", src.calls)
	}
	src.err = errors.New("down")
	now = now.Add(2 * time.Second)
	if _, err := c.Matching(ctx, "ws1", "CONTACT_CREATED"); err == nil {
		t.Fatal("a failed lookup was answered from the expired entry")
	}
	src.err = nil
	c.Matching(ctx, "ws1", "CONTACT_CREATED") //nolint:errcheck
	if src.calls != 6 {
		t.Fatalf("%d queries, want 6: a failed lookup is not cached", src.calls)
	}
}

// TestIgnoresOnlyWhatTheCacheRulesOut: Ignores says yes for a type that is
// not fanned out, and for a fanned-out one only once every source's cache
// holds no target for the workspace and event; without a cached answer
// (never looked up, or past the TTL) or with a target it says no.
func TestIgnoresOnlyWhatTheCacheRulesOut(t *testing.T) {
	none, some := &countingSource{}, &countingSource{}
	a, b := cached(none, time.Second), cached(some, time.Second)
	now := time.Unix(1000, 0)
	a.cache.Now = func() time.Time { return now }
	b.cache.Now = a.cache.Now
	s := New(map[string]string{"contact.created.v1": "CONTACT_CREATED"}, a, b)
	env := &schemas.Envelope{ID: "e1", Workspace: "ws1", Type: "contact.created.v1", Payload: []byte(`{"contactId":"c1"}`)}

	if s.Ignores(&schemas.Envelope{Workspace: "ws1", Type: "contact.deleted.v1"}) != true {
		t.Fatal("a type the stage does not fan out is not ignored")
	}
	if s.Ignores(env) {
		t.Fatal("ignored before any lookup")
	}
	if out, err := s.Handle(context.Background(), *env); err != nil || len(out) != 0 {
		t.Fatalf("Handle without targets: %v %v", out, err)
	}
	if !s.Ignores(env) {
		t.Fatal("not ignored once both caches hold no target")
	}
	if s.Ignores(&schemas.Envelope{Workspace: "ws2", Type: env.Type}) {
		t.Fatal("another workspace is ignored on the first one's answer")
	}
	now = now.Add(time.Second)
	if s.Ignores(env) {
		t.Fatal("ignored after the TTL")
	}
	some.hooks = []webhook.Hook{{ID: "h1", URL: "https://example.test/hook"}}
	if _, err := s.Handle(context.Background(), *env); err != nil {
		t.Fatal(err)
	}
	if s.Ignores(env) {
		t.Fatal("ignored while a source has a target")
	}
}
