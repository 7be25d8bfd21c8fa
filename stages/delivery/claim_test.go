package delivery

import (
	"context"
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
	s := &Stage{pg: pg, token: "me", cfg: Config{ClaimLease: time.Minute}}

	got, err := s.claim(ctx, []string{id("queued"), id("mine"), id("busy"), id("stale"), id("sent"), id("absent")})
	if err != nil {
		t.Fatal(err)
	}
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
	got, err = s.claim(ctx, []string{id("a"), id("b"), id("a")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[id("a")] != "claimed" || got[id("b")] != "claimed" {
		t.Errorf("claim = %v, want a and b claimed", got)
	}
	// Another worker finds them busy.
	other := &Stage{pg: pg, token: "other", cfg: Config{ClaimLease: time.Minute}}
	got, err = other.claim(ctx, []string{id("a"), id("b")})
	if err != nil {
		t.Fatal(err)
	}
	if got[id("a")] != "busy" || got[id("b")] != "busy" {
		t.Errorf("another worker's claim = %v, want both busy", got)
	}
}
