package stack

import (
	"context"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// mergeRace is the message of a ClickHouse 18.16 read that met a part a
// background merge was replacing; the same read later succeeds. One such
// part stayed unreadable for about 8 s in a CI run, so reads retry for up
// to mergeRaceTries × mergeRacePause.
const mergeRace = "Could not find a column of minimum size"

const (
	mergeRaceTries = 40
	mergeRacePause = 500 * time.Millisecond
)

// retryConn is a test connection whose reads retry mergeRace (for up to
// 20 s).
// Everything else passes through.
type retryConn struct{ driver.Conn }

// QueryRow runs the query once Scan is called, again on mergeRace.
func (c retryConn) QueryRow(ctx context.Context, query string, args ...any) driver.Row {
	return &retryRow{conn: c.Conn, ctx: ctx, query: query, args: args}
}

// Query retries mergeRace before any row is read.
func (c retryConn) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	for try := 0; ; try++ {
		rows, err := c.Conn.Query(ctx, query, args...)
		if err == nil || try == mergeRaceTries || !strings.Contains(err.Error(), mergeRace) {
			return rows, err
		}
		time.Sleep(mergeRacePause)
	}
}

type retryRow struct {
	conn  driver.Conn
	ctx   context.Context // the caller's, held only until Scan
	query string
	args  []any
	row   driver.Row
}

func (r *retryRow) run(scan func(driver.Row) error) error {
	for try := 0; ; try++ {
		r.row = r.conn.QueryRow(r.ctx, r.query, r.args...)
		err := scan(r.row)
		if err == nil || try == mergeRaceTries || !strings.Contains(err.Error(), mergeRace) {
			return err
		}
		time.Sleep(mergeRacePause)
	}
}

func (r *retryRow) Err() error {
	return r.run(func(row driver.Row) error { return row.Err() })
}

func (r *retryRow) Scan(dest ...any) error {
	return r.run(func(row driver.Row) error { return row.Scan(dest...) })
}

func (r *retryRow) ScanStruct(dest any) error {
	return r.run(func(row driver.Row) error { return row.ScanStruct(dest) })
}
