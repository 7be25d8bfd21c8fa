package admincli

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Env gives a command the stores it needs. Each is opened on the first
// call that asks for it, once, and closed by Close; a command that needs no
// ClickHouse never connects to it. One Env serves one command, from one
// goroutine.
type Env struct {
	openPG func(context.Context) (*pgxpool.Pool, error)
	openCH func(context.Context) (driver.Conn, error)
	pg     *pgxpool.Pool
	ch     driver.Conn
}

// NewEnv returns an Env that opens Postgres with openPG (a pool with the
// migrations applied) and ClickHouse with openCH. The root package's admin
// command passes openers that find the local stack (deploy/stack.Load);
// tests may pass their own.
func NewEnv(openPG func(context.Context) (*pgxpool.Pool, error), openCH func(context.Context) (driver.Conn, error)) *Env {
	return &Env{openPG: openPG, openCH: openCH}
}

// PG returns the Postgres pool, opening it on the first call.
func (e *Env) PG(ctx context.Context) (*pgxpool.Pool, error) {
	if e.pg == nil {
		pg, err := e.openPG(ctx)
		if err != nil {
			return nil, err
		}
		e.pg = pg
	}
	return e.pg, nil
}

// CH returns the ClickHouse connection, opening it on the first call.
func (e *Env) CH(ctx context.Context) (driver.Conn, error) {
	if e.ch == nil {
		ch, err := e.openCH(ctx)
		if err != nil {
			return nil, err
		}
		e.ch = ch
	}
	return e.ch, nil
}

// Close closes what PG and CH opened; Run calls it when the command ends.
func (e *Env) Close() {
	if e.pg != nil {
		e.pg.Close()
		e.pg = nil
	}
	if e.ch != nil {
		_ = e.ch.Close()
		e.ch = nil
	}
}
