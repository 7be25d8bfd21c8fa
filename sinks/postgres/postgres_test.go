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
