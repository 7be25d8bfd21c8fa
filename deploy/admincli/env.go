package admincli

import (
	"context"
	"errors"
	"io"

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

	openPub func(context.Context) (io.Closer, error)
	pub     io.Closer

	prefix func() (string, error)
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

// WithPublisher sets how Publisher opens the pipeline's producer and
// returns e. The root package's admin command passes an opener returning a
// *pipeline.Producer on the configured brokers and topic prefix; this
// package names no pipeline type, so that it imports nothing of
// sendstream's.
func (e *Env) WithPublisher(open func(context.Context) (io.Closer, error)) *Env {
	e.openPub = open
	return e
}

// Publisher returns the producer WithPublisher's opener makes, opening it
// on the first call; a command asserts it to the interface it publishes
// through (pipeline.Publisher). It fails when no opener was set.
func (e *Env) Publisher(ctx context.Context) (io.Closer, error) {
	if e.pub == nil {
		if e.openPub == nil {
			return nil, errors.New("admin: no broker settings for this command")
		}
		pub, err := e.openPub(ctx)
		if err != nil {
			return nil, err
		}
		e.pub = pub
	}
	return e.pub, nil
}

// WithTopicPrefix sets how TopicPrefix reads the deployment's topic prefix
// (SENDSTREAM_TOPIC_PREFIX, through the root package's config) and returns
// e.
func (e *Env) WithTopicPrefix(read func() (string, error)) *Env {
	e.prefix = read
	return e
}

// TopicPrefix returns the deployment's topic prefix: commands that write
// outbox rows scope them with it, so that the relay of the deployment the
// command speaks for publishes them (migration 0054). "" when no reader
// was set.
func (e *Env) TopicPrefix() (string, error) {
	if e.prefix == nil {
		return "", nil
	}
	return e.prefix()
}

// Close closes what PG, CH and Publisher opened (the producer first, which
// waits for what it still holds); Run calls it when the command ends.
func (e *Env) Close() {
	if e.pub != nil {
		_ = e.pub.Close()
		e.pub = nil
	}
	if e.pg != nil {
		e.pg.Close()
		e.pg = nil
	}
	if e.ch != nil {
		_ = e.ch.Close()
		e.ch = nil
	}
}
