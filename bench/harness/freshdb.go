package harness

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	chsink "sendstream/sinks/clickhouse"
)

// freshStores gives a run databases of its own on the stack's Postgres and
// ClickHouse servers, named after the benchmark (leftovers of an earlier,
// killed run are dropped first), and returns the stack pointed at them and
// a function that drops them. Each run then starts from the same state:
// what earlier runs seeded (a million contacts each) or logged (millions
// of request-log rows, whose background merges ClickHouse keeps running)
// would otherwise pile up in the stack's databases and slow every later
// run down. The server applies its migrations at start.
func freshStores(ctx context.Context, stack StackEnv, bench string) (StackEnv, func(), error) {
	name := "sendstream_bench_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(bench))
	u, err := url.Parse(stack.PostgresURL)
	if err != nil {
		return stack, nil, fmt.Errorf("fresh database: parse the stack's Postgres URL: %w", err)
	}
	adminURL, chAddr := stack.PostgresURL, stack.ClickHouseAddr // stack is repointed below
	pg := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	ch := func(ctx context.Context, sql string) error {
		conn, err := chsink.Open(ctx, chAddr, "default")
		if err != nil {
			return err
		}
		defer conn.Close()
		return conn.Exec(ctx, sql)
	}
	ident := pgx.Identifier{name}.Sanitize()
	drop := func(ctx context.Context) error {
		if err := pg(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop Postgres database %s: %w", name, err)
		}
		if err := ch(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			return fmt.Errorf("drop ClickHouse database %s: %w", name, err)
		}
		return nil
	}
	if err := drop(ctx); err != nil {
		return stack, nil, fmt.Errorf("fresh database: %w", err)
	}
	if err := pg(ctx, "CREATE DATABASE "+ident); err != nil {
		return stack, nil, fmt.Errorf("fresh database: create %s: %w", name, err)
	}
	u.Path = "/" + name
	stack.PostgresURL, stack.ClickHouseDB = u.String(), name
	return stack, func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = drop(dctx)
	}, nil
}
