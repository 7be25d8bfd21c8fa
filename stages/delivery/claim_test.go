package delivery

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
)

// TestClaimStates checks every state claim reports, against Postgres, for
// a batch mixing them and for batches the one-update path claims whole.
func TestClaimStates(t *testing.T) {
	pg := stack.PG(t)
	ctx := context.Background()
	ws, _, err := auth.NewStore(pg).CreateWorkspace(ctx, auth.NewWorkspace{Name: "claims", Plan: "pro"})
	if err != nil {
		t.Fatal(err)
	}
	id := func(s string) string { return ws + "-" + s }
	insert := func(name, status, token string, claimedAgo time.Duration) {
		t.Helper()
		_, err := pg.Exec(ctx, `INSERT INTO transactional_messages
			(id, workspace_id, to_email, rfc_message_id, policy_id, status, claim_token, claimed_at)
			VALUES ($1, $2, 'to@example.test', $1 || '@example.test', 'policy', $3, nullif($4, ''),
			        CASE WHEN $4 = '' THEN NULL ELSE now() - make_interval(secs => $5) END)`,
			id(name), ws, status, token, claimedAgo.Seconds())
		if err != nil {
			t.Fatal(err)
		}
	}
	insert("queued", "queued", "", 0)
	insert("mine", "queued", "me", time.Hour) // claimed by this token: claimed again
	insert("busy", "queued", "other", time.Second)
	insert("stale", "queued", "other", time.Hour)
	insert("sent", "sent", "", 0)
	insert("a", "queued", "", 0)
	insert("b", "queued", "", 0)
	s := newStore(pg, "me", time.Minute, 256)
	defer s.close()

	claims, err := s.claimIDs(ctx, []string{id("queued"), id("mine"), id("busy"), id("stale"), id("sent"), id("absent")})
	if err != nil {
		t.Fatal(err)
	}
	got := states(claims)
	want := map[string]string{id("queued"): "claimed", id("mine"): "claimed", id("busy"): "busy", id("stale"): "stale", id("sent"): "done"}
	if len(got) != len(want) {
		t.Errorf("claim = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	row := func(name string) (status, token string) {
		t.Helper()
		var tok *string
		if err := pg.QueryRow(ctx, `SELECT status, claim_token FROM transactional_messages WHERE id = $1`, id(name)).Scan(&status, &tok); err != nil {
			t.Fatal(err)
		}
		if tok != nil {
			token = *tok
		}
		return status, token
	}
	for name, want := range map[string][2]string{
		"queued": {"queued", "me"}, "mine": {"queued", "me"}, "busy": {"queued", "other"}, "stale": {"failed", ""}, "sent": {"sent", ""},
	} {
		if st, tok := row(name); st != want[0] || tok != want[1] {
			t.Errorf("%s: status %q token %q, want %q %q", name, st, tok, want[0], want[1])
		}
	}

	// All claimable, one given twice: one update claims them.
	claims, err = s.claimIDs(ctx, []string{id("a"), id("b"), id("a")})
	if err != nil {
		t.Fatal(err)
	}
	got = states(claims)
	if len(got) != 2 || got[id("a")] != "claimed" || got[id("b")] != "claimed" {
		t.Errorf("claim = %v, want a and b claimed", got)
	}
	// Another worker finds them busy.
	other := newStore(pg, "other", time.Minute, 256)
	defer other.close()
	claims, err = other.claimIDs(ctx, []string{id("a"), id("b")})
	if err != nil {
		t.Fatal(err)
	}
	got = states(claims)
	if got[id("a")] != "busy" || got[id("b")] != "busy" {
		t.Errorf("another worker's claim = %v, want both busy", got)
	}
}

// states maps each claimed id to its state.
func states(claims map[string]claim) map[string]string {
	out := make(map[string]string, len(claims))
	for id, c := range claims {
		out[id] = c.state
	}
	return out
}

// TestClaimsShareStatements: concurrent claims through the batcher each
// get their own message's state, and a done message reports its outcome
// (for the outputs of a redelivered envelope).
func TestClaimsShareStatements(t *testing.T) {
	pg := stack.PG(t)
	ctx := context.Background()
	ws, _, err := auth.NewStore(pg).CreateWorkspace(ctx, auth.NewWorkspace{Name: "batched claims", Plan: "pro"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 40 {
		id := fmt.Sprintf("%s-b%d", ws, i)
		ids = append(ids, id)
		status := "queued"
		if i%4 == 3 {
			status = "sent"
		}
		if _, err := pg.Exec(ctx, `INSERT INTO transactional_messages (id, workspace_id, to_email, rfc_message_id, policy_id, status, sent_at)
			VALUES ($1, $2, 'to@example.test', $1 || '@example.test', 'policy', $3, CASE WHEN $3 = 'sent' THEN now() END)`, id, ws, status); err != nil {
			t.Fatal(err)
		}
	}
	s := newStore(pg, "batch", time.Minute, 256)
	defer s.close()
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.claim(ctx, id)
			switch {
			case err != nil:
				t.Errorf("%s: %v", id, err)
			case i%4 == 3 && (c.state != stateDone || c.sentAt == nil):
				t.Errorf("%s: %+v, want done with its sent time", id, c)
			case i%4 != 3 && c.state != stateClaimed:
				t.Errorf("%s: %+v, want claimed", id, c)
			}
		}()
	}
	wg.Wait()
	// Finishing through the batcher records each outcome once.
	for i, id := range ids {
		if i%4 == 3 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := s.finish(ctx, finishIn{id: id, status: "sent"})
			if err != nil || !f.ok || f.at.IsZero() {
				t.Errorf("finish %s: %+v %v", id, f, err)
			}
		}()
	}
	wg.Wait()
	if f, err := s.finish(ctx, finishIn{id: ids[0], status: "sent"}); err != nil || f.ok {
		t.Errorf("a second finish of one claim: %+v %v; want nothing recorded", f, err)
	}
}
