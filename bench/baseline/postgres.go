package baseline

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// FROZEN: the Postgres baselines.

var (
	//go:embed sql/pg_setup.sql
	pgSetupSQL string
	//go:embed sql/pg_upsert_row.sql
	pgUpsertRowSQL string
	//go:embed sql/pg_upsert_unnest.sql
	pgUpsertUnnestSQL string
)

const (
	pgRowConns    = 16
	pgUnnestConns = 4
	pgUnnestRows  = 1000
	pgCopyConns   = 2
	pgCopyRows    = 10000
)

func init() {
	register(&Baseline{
		Name:    "pg-upsert-row",
		Doc:     "Postgres single-row INSERT … ON CONFLICT DO NOTHING RETURNING, new rows, 16 connections",
		Unit:    "rows",
		Needs:   []Need{NeedPostgres},
		Workers: pgRowConns,
		Setup: func(ctx context.Context, env Env) (func(context.Context, int) (Op, error), func(), error) {
			pool, err := pgSetup(ctx, env, pgRowConns)
			if err != nil {
				return nil, nil, err
			}
			return func(_ context.Context, w int) (Op, error) {
				var n uint64
				prefix := "w" + strconv.Itoa(w) + "-" + RunToken + "-"
				return func(ctx context.Context) (int, error) {
					n++
					var id [16]byte
					email := prefix + strconv.FormatUint(n, 10) + "@bench.example.com"
					if err := pool.QueryRow(ctx, pgUpsertRowSQL, "ws_bench", email, "Ada").Scan(&id); err != nil {
						return 0, fmt.Errorf("upsert row: %w", err)
					}
					return 1, nil
				}, nil
			}, pool.Close, nil
		},
	})
	register(&Baseline{
		Name:    "pg-upsert-unnest",
		Doc:     "Postgres multi-row upsert via unnest, 1000 rows per statement, 4 connections",
		Unit:    "rows",
		Needs:   []Need{NeedPostgres},
		Workers: pgUnnestConns,
		Setup: func(ctx context.Context, env Env) (func(context.Context, int) (Op, error), func(), error) {
			pool, err := pgSetup(ctx, env, pgUnnestConns)
			if err != nil {
				return nil, nil, err
			}
			return func(_ context.Context, w int) (Op, error) {
				var n uint64
				prefix := "w" + strconv.Itoa(w) + "-" + RunToken + "-"
				emails := make([]string, pgUnnestRows)
				names := make([]string, pgUnnestRows)
				return func(ctx context.Context) (int, error) {
					for i := range emails {
						n++
						emails[i] = prefix + strconv.FormatUint(n, 10) + "@bench.example.com"
						names[i] = "Ada"
					}
					if _, err := pool.Exec(ctx, pgUpsertUnnestSQL, "ws_bench", emails, names); err != nil {
						return 0, fmt.Errorf("upsert unnest: %w", err)
					}
					return pgUnnestRows, nil
				}, nil
			}, pool.Close, nil
		},
	})
	register(&Baseline{
		Name:    "pg-copy",
		Doc:     "Postgres COPY of 10k new rows per call, 2 connections",
		Unit:    "rows",
		Needs:   []Need{NeedPostgres},
		Workers: pgCopyConns,
		Setup: func(ctx context.Context, env Env) (func(context.Context, int) (Op, error), func(), error) {
			pool, err := pgSetup(ctx, env, pgCopyConns)
			if err != nil {
				return nil, nil, err
			}
			cols := []string{"workspace_id", "email", "first_name"}
			return func(_ context.Context, w int) (Op, error) {
				var n uint64
				prefix := "w" + strconv.Itoa(w) + "-" + RunToken + "-"
				rows := make([][]any, pgCopyRows)
				return func(ctx context.Context) (int, error) {
					for i := range rows {
						n++
						rows[i] = []any{"ws_bench", prefix + strconv.FormatUint(n, 10) + "@bench.example.com", "Ada"}
					}
					c, err := pool.CopyFrom(ctx, pgx.Identifier{"bench_baseline", "contacts"}, cols, pgx.CopyFromRows(rows))
					if err != nil {
						return 0, fmt.Errorf("copy: %w", err)
					}
					return int(c), nil
				}, nil
			}, pool.Close, nil
		},
	})
}

// pgSetup connects with conns connections and (re)creates the empty scratch
// table.
func pgSetup(ctx context.Context, env Env, conns int) (*pgxpool.Pool, error) {
	if env.PostgresURL == "" {
		return nil, fmt.Errorf("no Postgres URL (SENDSTREAM_POSTGRES_URL)")
	}
	cfg, err := pgxpool.ParseConfig(env.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("parse Postgres URL: %w", err)
	}
	cfg.MaxConns = int32(conns)
	cfg.MinConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	if _, err := pool.Exec(ctx, pgSetupSQL); err != nil {
		pool.Close()
		return nil, fmt.Errorf("create scratch table: %w", err)
	}
	return pool, nil
}
