package harness

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// freshDatabase creates an empty Postgres database named after the
// benchmark on the server of stackURL (dropping a leftover of an earlier,
// killed run) and returns its URL and a function that drops it. Each run
// then starts from the same state: data that earlier runs seeded (a
// million contacts each) would otherwise pile up in the stack's database
// and slow every later run down. The server applies its migrations at
// start.
func freshDatabase(ctx context.Context, stackURL, bench string) (string, func(), error) {
	u, err := url.Parse(stackURL)
	if err != nil {
		return "", nil, fmt.Errorf("fresh database: parse the stack's Postgres URL: %w", err)
	}
	name := "sendstream_bench_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(bench))
	admin := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, stackURL)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	ident := pgx.Identifier{name}.Sanitize()
	if err := admin(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return "", nil, fmt.Errorf("fresh database: drop leftover %s: %w", name, err)
	}
	if err := admin(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", nil, fmt.Errorf("fresh database: create %s: %w", name, err)
	}
	u.Path = "/" + name
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = admin(dctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
	}
	return u.String(), drop, nil
}
