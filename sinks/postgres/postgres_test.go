package postgres_test

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/schemas"
	pgsink "sendstream/sinks/postgres"
)

func TestOpenRejectsBadURL(t *testing.T) {
	ctx := context.Background()
	if _, err := pgsink.Open(ctx, "postgres://127.0.0.1:1/x?sslmode=disable&connect_timeout=2"); err == nil {
		t.Fatal("Open on a closed port: want an error")
	}
	if _, err := pgsink.Open(ctx, "::not a url"); err == nil {
		t.Fatal("Open on a malformed url: want an error")
	}
}

// TestMigrateConcurrentIdempotent runs Migrate from several pools at once
// (as parallel test packages and replicas do) and again afterwards: every
// migration file is recorded exactly once and nothing fails.
func TestMigrateConcurrentIdempotent(t *testing.T) {
	env := stack.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool, err := pgsink.Open(ctx, env.PostgresURL)
			if err != nil {
				errs <- err
				return
			}
			defer pool.Close()
			errs <- pgsink.Migrate(ctx, pool)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}

	pool := stack.PG(t) // migrates once more
	if err := pgsink.Migrate(ctx, pool); err != nil {
		t.Fatalf("repeated Migrate: %v", err)
	}
	entries, err := fs.ReadDir(schemas.Migrations, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM schema_migrations WHERE name = $1", e.Name()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("schema_migrations has %d rows for %s, want 1", n, e.Name())
		}
	}
	var maxConns int
	if err := pool.QueryRow(ctx, "SELECT current_setting('max_connections')::int").Scan(&maxConns); err != nil {
		t.Fatal(err)
	}
	if maxConns < 100 {
		t.Errorf("max_connections = %d, want the stack's 200", maxConns)
	}
	if got := pool.Config().MaxConns; got < 16 {
		t.Errorf("pool MaxConns = %d, want at least 16", got)
	}
}

// TestDeletesCascadeWithoutHotPathKeys checks the triggers of
// 0040_hot_path_cascades.sql: deleting a contact removes its activity, and
// deleting a workspace removes its contacts (with their activity), its
// messages and their payloads, and its counter rows.
func TestDeletesCascadeWithoutHotPathKeys(t *testing.T) {
	pool := stack.PG(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, c1, c2, msg := schemas.NewID(), schemas.NewID(), schemas.NewID(), schemas.NewID()
	for _, st := range []struct {
		q    string
		args []any
	}{
		{`INSERT INTO workspaces (id, name) VALUES ($1, 'cascade test')`, []any{ws}},
		{`INSERT INTO contacts (id, workspace_id, seq, email)
		  VALUES ($2, $1, nextval('contacts_seq'), $2 || '@cascade.example'),
		         ($3, $1, nextval('contacts_seq'), $3 || '@cascade.example')`, []any{ws, c1, c2}},
		{`INSERT INTO contact_activity (contact_id, workspace_id) VALUES ($2, $1), ($3, $1)`, []any{ws, c1, c2}},
		{`INSERT INTO transactional_messages (id, workspace_id, to_email, rfc_message_id, policy_id)
		  VALUES ($2, $1, 'to@cascade.example', $2 || '@cascade.example', 'p')`, []any{ws, msg}},
		{`INSERT INTO transactional_payloads (message_id, payload) VALUES ($1, '{}')`, []any{msg}},
	} {
		if _, err := pool.Exec(ctx, st.q, st.args...); err != nil {
			t.Fatalf("%s: %v", st.q, err)
		}
	}
	count := func(q string, arg string) int {
		var n int
		if err := pool.QueryRow(ctx, q, arg).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	if _, err := pool.Exec(ctx, `DELETE FROM contacts WHERE id = $1`, c1); err != nil {
		t.Fatalf("delete contact: %v", err)
	}
	if n := count(`SELECT count(*) FROM contact_activity WHERE contact_id = $1`, c1); n != 0 {
		t.Fatalf("activity of a deleted contact: %d rows left", n)
	}
	if n := count(`SELECT count(*) FROM contact_activity WHERE contact_id = $1`, c2); n != 1 {
		t.Fatalf("activity of a kept contact: %d rows, want 1", n)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM workspaces WHERE id = $1`, ws); err != nil {
		t.Fatalf("delete workspace: %v", err)
	}
	for q, arg := range map[string]string{
		`SELECT count(*) FROM contacts WHERE workspace_id = $1`:               ws,
		`SELECT count(*) FROM contact_activity WHERE workspace_id = $1`:       ws,
		`SELECT count(*) FROM contact_buckets WHERE workspace_id = $1`:        ws,
		`SELECT count(*) FROM transactional_messages WHERE workspace_id = $1`: ws,
		`SELECT count(*) FROM transactional_payloads WHERE message_id = $1`:   msg,
	} {
		if n := count(q, arg); n != 0 {
			t.Errorf("after deleting the workspace, %s: %d rows left", q, n)
		}
	}
}

// TestOpenTurnsParallelQueryOff: pool sessions run without parallel
// workers unless the URL asks for them.
func TestOpenTurnsParallelQueryOff(t *testing.T) {
	env := stack.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct{ suffix, want string }{
		{"", "0"},
		{"max_parallel_workers_per_gather=3", "3"},
	} {
		url := env.PostgresURL
		if c.suffix != "" {
			sep := "?"
			if strings.Contains(url, "?") {
				sep = "&"
			}
			url += sep + c.suffix
		}
		pool, err := pgsink.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = pool.QueryRow(ctx, "SHOW max_parallel_workers_per_gather").Scan(&got)
		pool.Close()
		if err != nil || got != c.want {
			t.Fatalf("URL suffix %q: max_parallel_workers_per_gather = %q (%v), want %q", c.suffix, got, err, c.want)
		}
	}
}

// TestLookupPoolSessions: a lookup pool's sessions force generic plans,
// avoid sequential scans, and commit asynchronously only when asked.
func TestLookupPoolSessions(t *testing.T) {
	base := stack.PG(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, async := range []bool{false, true} {
		pool, err := pgsink.LookupPool(ctx, base, 2, async)
		if err != nil {
			t.Fatal(err)
		}
		var plan, seq, commit string
		err = pool.QueryRow(ctx, "SELECT current_setting('plan_cache_mode'), current_setting('enable_seqscan'), current_setting('synchronous_commit')").
			Scan(&plan, &seq, &commit)
		pool.Close()
		wantCommit := map[bool]string{false: "on", true: "off"}[async]
		if err != nil || plan != "force_generic_plan" || seq != "off" || commit != wantCommit {
			t.Fatalf("async %v: plan_cache_mode %q, enable_seqscan %q, synchronous_commit %q (%v); want force_generic_plan, off, %s",
				async, plan, seq, commit, err, wantCommit)
		}
	}
}
