package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"sendstream/deploy/stack"
)

// TestTrackingTokensListedAndDeletedAtOnce: ListTrackingTokens shows a
// workspace's tokens by hint (never the token), newest first;
// DeleteTrackingToken removes one, and a cache that holds it refuses it
// once the deletion's NOTIFY arrives (the TTL is an hour, so only the
// invalidation can); another workspace cannot delete it.
func TestTrackingTokensListedAndDeletedAtOnce(t *testing.T) {
	ctx := context.Background()
	c := NewCache(NewStore(stack.PG(t)), CacheConfig{TTL: time.Hour})
	s, _ := startListener(t, c, &recorder{})
	ws, _, err := s.CreateWorkspace(ctx, NewWorkspace{Name: "tracking tokens"})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := s.CreateWorkspace(ctx, NewWorkspace{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	id1, tok1, err := s.CreateTrackingToken(ctx, ws, []string{"Example.com", " shop.example.org "})
	if err != nil {
		t.Fatal(err)
	}
	id2, tok2, err := s.CreateTrackingToken(ctx, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.ListTrackingTokens(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != id2 || list[1].ID != id1 {
		t.Fatalf("list %+v, want %s then %s", list, id2, id1)
	}
	if d := list[1].Domains; len(d) != 2 || d[0] != "example.com" || d[1] != "shop.example.org" || len(list[0].Domains) != 0 {
		t.Errorf("domains %v and %v, want [example.com shop.example.org] and []", d, list[0].Domains)
	}
	if h := list[1].Hint; h != TrackingTokenPrefix+"…"+tok1[len(tok1)-4:] || strings.Contains(h, tok1[len(TrackingTokenPrefix):len(tok1)-4]) {
		t.Errorf("hint %q of %s", h, tok1)
	}
	if l, err := s.ListTrackingTokens(ctx, other); err != nil || len(l) != 0 {
		t.Errorf("another workspace lists %v (%v)", l, err)
	}

	for _, tok := range []string{tok1, tok2} {
		if _, err := c.Authenticate(ctx, []byte(tok)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteTrackingToken(ctx, other, id1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another workspace deleting: %v, want ErrNotFound", err)
	}
	if err := s.DeleteTrackingToken(ctx, ws, id1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted tracking token refused", func() bool {
		_, err := c.Authenticate(ctx, []byte(tok1))
		return errors.Is(err, ErrUnknown)
	})
	if _, err := c.Authenticate(ctx, []byte(tok2)); err != nil {
		t.Errorf("the other token after the deletion: %v", err)
	}
	if err := s.DeleteTrackingToken(ctx, ws, id1); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting again: %v, want ErrNotFound", err)
	}
	if l, _ := s.ListTrackingTokens(ctx, ws); len(l) != 1 || l[0].ID != id2 {
		t.Errorf("after the deletion the list is %+v, want only %s", l, id2)
	}
}
