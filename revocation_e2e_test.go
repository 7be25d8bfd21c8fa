package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// revocationBound is issue 27's bound: a key deleted, or a workspace
// suspended or resumed, through one process is answered accordingly by
// another within 100 ms.
const revocationBound = 100 * time.Millisecond

// Two ingest processes cache a key (for a minute: SENDSTREAM_KEY_CACHE_TTL
// is at its maximum, so only the cross-process invalidation can explain an
// answer that changes sooner). Deleting the key with the admin CLI, a
// process of its own, makes the second server refuse it with 401 within
// 100 ms of the command's return; suspending the workspace makes it answer
// 403 TEAM_SUSPENDED, and resuming it 200 again, each within 100 ms. A
// control first shows that a change made without a notification is not
// seen while the entry is cached.
func TestRevocationReachesEveryProcessAtOnce(t *testing.T) {
	e := newE2E(t)
	_, first := e.serverWith(t, "ingest", "SENDSTREAM_KEY_CACHE_TTL=1m")
	_, second := e.serverWith(t, "ingest", "SENDSTREAM_KEY_CACHE_TTL=1m")
	var ws workspace
	e.admin(t, &ws, "workspace", "create", "--name", "revocation", "--plan", "enterprise", "--rate-multiplier", "100000")
	var k struct{ ID, Key string }
	e.admin(t, &k, "apikey", "create", "--workspace", ws.WorkspaceID, "--name", "to delete")

	status := func(base, key string) (int, string) {
		code, body, _ := get(t, base+"/api/v1/me", key)
		var b struct{ Code string }
		_ = json.Unmarshal(body, &b)
		return code, b.Code
	}
	// Both servers resolve and cache both keys.
	for _, base := range []string{first, second} {
		for _, key := range []string{ws.APIKey, k.Key} {
			for range 2 {
				if code, c := status(base, key); code != 200 {
					t.Fatalf("GET /api/v1/me via %s: %d %s", base, code, c)
				}
			}
		}
	}
	// until polls a server every millisecond until key's answer is want
	// (and code, when set), and returns the time since done.
	until := func(what, base, key string, want int, code string, done time.Time) time.Duration {
		t.Helper()
		for {
			got, c := status(base, key)
			if got == want && (code == "" || c == code) {
				return time.Since(done)
			}
			if time.Since(done) > 10*time.Second {
				t.Fatalf("%s: %s still answers %d %s after 10 s", what, base, got, c)
			}
			time.Sleep(time.Millisecond)
		}
	}
	check := func(what string, took time.Duration) {
		t.Helper()
		t.Logf("%s: answered accordingly %v after the admin command returned", what, took)
		if took > revocationBound {
			t.Errorf("%s: took %v; issue 27 asks for at most %v", what, took, revocationBound)
		}
	}

	// Control: suspended behind the caches' back (session_replication_role
	// = replica skips the triggers that announce it), the cached key keeps
	// working on the second server; resumed the same way afterwards.
	silently := func(suspended bool) {
		t.Helper()
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, e.st.PostgresURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "SET session_replication_role = replica"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "UPDATE workspaces SET suspended = $2 WHERE id = $1", ws.WorkspaceID, suspended); err != nil {
			t.Fatal(err)
		}
	}
	silently(true)
	for start := time.Now(); time.Since(start) < 3*revocationBound; time.Sleep(time.Millisecond) {
		if code, c := status(second, ws.APIKey); code != 200 {
			t.Fatalf("control: a suspension that announced nothing was seen at once (%d %s); the cache is not in effect, so this test proves nothing", code, c)
		}
	}
	silently(false)

	var deleted map[string]bool
	e.admin(t, &deleted, "apikey", "delete", "--workspace", ws.WorkspaceID, "--id", k.ID)
	done := time.Now()
	check("deleted key, second server", until("deleted key", second, k.Key, 401, "unauthorized", done))
	check("deleted key, first server", until("deleted key", first, k.Key, 401, "unauthorized", done))
	if code, c := status(second, ws.APIKey); code != 200 {
		t.Fatalf("the workspace's other key: %d %s", code, c)
	}

	var out map[string]any
	e.admin(t, &out, "workspace", "suspend", "--workspace", ws.WorkspaceID)
	done = time.Now()
	check("suspension, second server", until("suspension", second, ws.APIKey, 403, "TEAM_SUSPENDED", done))
	check("suspension, first server", until("suspension", first, ws.APIKey, 403, "TEAM_SUSPENDED", done))

	e.admin(t, &out, "workspace", "resume", "--workspace", ws.WorkspaceID)
	done = time.Now()
	check("resumption, second server", until("resumption", second, ws.APIKey, 200, "", done))
	check("resumption, first server", until("resumption", first, ws.APIKey, 200, "", done))
}
