// Package postgres opens the Postgres pool and applies the schema migrations
// of schemas/postgres.
package postgres

import (
	"context"
	_ "embed"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
)

var (
	//go:embed sql/ledger_create.sql
	sqlLedgerCreate string
	//go:embed sql/ledger_applied.sql
	sqlLedgerApplied string
	//go:embed sql/ledger_record.sql
	sqlLedgerRecord string
	//go:embed sql/lock.sql
	sqlLock string
	//go:embed sql/unlock.sql
	sqlUnlock string
)

// migrationLockKey is the pg_advisory_lock key every Migrate call takes, so
// that concurrent processes (parallel test packages, several replicas
// starting at once) apply each migration exactly once.
const migrationLockKey int64 = 0x53656e6473747265 // "Sendstre"

// Open connects a pool to url and pings it. Unless url sets pool_max_conns,
// the pool holds up to max(16, 4*GOMAXPROCS) connections; the local stack's
// server allows 200, so several processes fit. Unless url sets
// max_parallel_workers_per_gather, its sessions run without parallel query:
// every statement of the API reads a page or a few rows by index, and a
// generic plan that guesses a large LIMIT launched two workers per page
// (GET /contacts?listId=… went from under 1 ms to 0.4–1 s at 500 requests/s
// on two cores). Callers Close the pool.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = int32(max(16, 4*runtime.GOMAXPROCS(0)))
	}
	if !strings.Contains(url, "pool_max_conn_idle_time") {
		cfg.MaxConnIdleTime = 5 * time.Minute
	}
	if _, set := cfg.ConnConfig.RuntimeParams["max_parallel_workers_per_gather"]; !set {
		cfg.ConnConfig.RuntimeParams["max_parallel_workers_per_gather"] = "0"
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: ping %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return pool, nil
}

// LookupPool opens a second pool of at most maxConns connections to the
// database of base, for statements that look rows up, claim and insert by
// key in batches passed as arrays. Its sessions run with:
//   - plan_cache_mode=force_generic_plan: such a statement's best plan does
//     not depend on its arrays, and planning it costs about as much as
//     running it;
//   - enable_seqscan=off: a generic plan is made once per connection, and
//     one made while a table was still nearly empty (a fresh database)
//     scanned it whole on every call as it grew (55 ms per batch of sends
//     at 20k rows, against 1-2 ms by index). A table without a usable
//     index is still scanned;
//   - synchronous_commit=off when asyncCommit: commits do not wait for the
//     WAL flush (for writes that something else makes durable).
//
// Its connections live 15-20 s, so no generic plan outlives the table sizes
// it was made for by more than that: a plan made while a table was nearly
// empty may pick any index that starts with the right column (several
// tie), and walk a whole workspace once the table has grown (auto_explain
// showed 20-90 ms per lookup batch, the messages of one workspace read by
// its status index, in a 30 s benchmark on a fresh database). Statements
// that can look rows up by primary key alone should, and do not depend on
// this.
func LookupPool(ctx context.Context, base *pgxpool.Pool, maxConns int, asyncCommit bool) (*pgxpool.Pool, error) {
	cfg := base.Config().Copy()
	cfg.MaxConns, cfg.MinConns = int32(maxConns), 0
	cfg.MaxConnLifetime, cfg.MaxConnLifetimeJitter = 15*time.Second, 5*time.Second
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	cfg.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
	if asyncCommit {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open lookup pool: %w", err)
	}
	return pool, nil
}

// Migrate applies the migrations of schemas/postgres that are not yet
// recorded in schema_migrations, in file-name order, each in its own
// transaction together with its ledger row. It holds a session advisory lock
// for the whole run, so concurrent callers wait and then find nothing to do.
// It is idempotent; an error names the migration that failed, and the
// migrations before it stay applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	names, err := schemas.MigrationNames(schemas.Migrations, "postgres")
	if err != nil {
		return fmt.Errorf("postgres migrate: %w", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres migrate: acquire: %w", err)
	}
	defer conn.Release()

	if _, err := conn.Exec(ctx, sqlLock, migrationLockKey); err != nil {
		return fmt.Errorf("postgres migrate: lock: %w", err)
	}
	defer func() {
		// Unlock even when ctx is done; a dead connection drops the lock anyway.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, sqlUnlock, migrationLockKey); err != nil {
			conn.Conn().Close(uctx) // never hand a locked session back to the pool
		}
	}()

	if _, err := conn.Exec(ctx, sqlLedgerCreate); err != nil {
		return fmt.Errorf("postgres migrate: create ledger: %w", err)
	}
	rows, err := conn.Query(ctx, sqlLedgerApplied)
	if err != nil {
		return fmt.Errorf("postgres migrate: read ledger: %w", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("postgres migrate: read ledger: %w", err)
	}
	done := make(map[string]bool, len(applied))
	for _, n := range applied {
		done[n] = true
	}

	for _, name := range names {
		if done[name] {
			continue
		}
		body, err := fs.ReadFile(schemas.Migrations, "postgres/"+name)
		if err != nil {
			return fmt.Errorf("postgres migrate: read %s: %w", name, err)
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			// Simple protocol: a file may hold several statements.
			if _, err := tx.Exec(ctx, string(body), pgx.QueryExecModeSimpleProtocol); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, sqlLedgerRecord, name)
			return err
		})
		if err != nil {
			return fmt.Errorf("postgres migrate: apply %s: %w", name, err)
		}
	}
	return nil
}
