package clickhouse_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"sendstream/sinks/breaker"
	chsink "sendstream/sinks/clickhouse"
)

// fakeConn is a driver.Conn whose PrepareBatch hands out fakeBatches that
// record what is appended; the other methods are not implemented.
type fakeConn struct {
	driver.Conn

	mu         sync.Mutex
	prepares   int
	sql        string
	prepareErr error
	appendErr  error // returned by Append for the row with id failOn
	failOn     string
	sendErr    error
	sent       [][]any // the rows of every batch sent
	closed     int
}

func (c *fakeConn) PrepareBatch(_ context.Context, sql string, _ ...driver.PrepareBatchOption) (driver.Batch, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prepares++
	c.sql = sql
	if c.prepareErr != nil {
		return nil, c.prepareErr
	}
	return &fakeBatch{conn: c}, nil
}

type fakeBatch struct {
	driver.Batch
	conn *fakeConn
	rows []any
}

func (b *fakeBatch) Append(v ...any) error {
	if b.conn.appendErr != nil && v[0] == b.conn.failOn {
		return b.conn.appendErr
	}
	b.rows = append(b.rows, append([]any(nil), v...))
	return nil
}

func (b *fakeBatch) Send() error {
	b.conn.mu.Lock()
	defer b.conn.mu.Unlock()
	if b.conn.sendErr != nil {
		return b.conn.sendErr
	}
	b.conn.sent = append(b.conn.sent, b.rows)
	return nil
}

func (b *fakeBatch) Close() error {
	b.conn.mu.Lock()
	defer b.conn.mu.Unlock()
	b.conn.closed++
	return nil
}

type testRow struct {
	id string
	n  int
}

func appendTestRow(b driver.Batch, rows []testRow) error {
	for _, r := range rows {
		if err := b.Append(r.id, r.n); err != nil {
			return err
		}
	}
	return nil
}

func testBreaker(failures uint32) *breaker.Breaker {
	return breaker.Config{ConsecutiveFailures: failures, Metrics: prometheus.NewRegistry()}.New("test")
}

func TestBufferAddKeepsTheFirstCopyPutTheLast(t *testing.T) {
	var first, last chsink.Buffer[testRow]
	for i, id := range []string{"a", "b", "a", "c", "b"} {
		wantNew := i < 2 || id == "c"
		if got := first.Add(id, testRow{id, i}); got != wantNew {
			t.Errorf("Add(%s) #%d = %v, want %v", id, i, got, wantNew)
		}
		if got := last.Put(id, testRow{id, i}); got != wantNew {
			t.Errorf("Put(%s) #%d = %v, want %v", id, i, got, wantNew)
		}
	}
	if got, want := first.Rows(), []testRow{{"a", 0}, {"b", 1}, {"c", 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Add: rows %v, want %v", got, want)
	}
	if got, want := last.Rows(), []testRow{{"a", 2}, {"b", 4}, {"c", 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Put: rows %v, want %v", got, want)
	}
	if first.Len() != 3 || last.Len() != 3 {
		t.Errorf("Len = %d, %d, want 3, 3", first.Len(), last.Len())
	}
}

func TestBufferFlushInsertsOneBatchAndEmpties(t *testing.T) {
	ctx := context.Background()
	conn := &fakeConn{}
	br := testBreaker(5)
	var b chsink.Buffer[testRow]

	if err := b.Flush(ctx, conn, br, "INSERT x", appendTestRow); err != nil || conn.prepares != 0 {
		t.Fatalf("empty Flush = %v with %d batches prepared, want nil and none", err, conn.prepares)
	}
	b.Add("a", testRow{"a", 1})
	b.Add("b", testRow{"b", 2})
	if err := b.Flush(ctx, conn, br, "INSERT x", appendTestRow); err != nil {
		t.Fatal(err)
	}
	want := [][]any{{[]any{"a", 1}, []any{"b", 2}}}
	if conn.sql != "INSERT x" || !reflect.DeepEqual(conn.sent, want) || conn.closed != 1 {
		t.Fatalf("sql %q, sent %v, %d closed; want INSERT x, %v, 1", conn.sql, conn.sent, conn.closed, want)
	}
	if b.Len() != 0 {
		t.Fatalf("%d rows after a successful Flush, want 0", b.Len())
	}
	// The ids are forgotten too: the same id is buffered again.
	if !b.Add("a", testRow{"a", 3}) || b.Len() != 1 {
		t.Fatal("id of a flushed row still counted as buffered")
	}
}

func TestBufferFailedFlushKeepsTheRows(t *testing.T) {
	ctx := context.Background()
	sendErr := errors.New("server away")
	for _, c := range []struct {
		name string
		conn *fakeConn
		want string
	}{
		{"prepare", &fakeConn{prepareErr: sendErr}, "insert 2 rows: prepare: server away"},
		{"append", &fakeConn{appendErr: sendErr, failOn: "b"}, "insert 2 rows: append: server away"},
		{"send", &fakeConn{sendErr: sendErr}, "insert 2 rows: send: server away"},
	} {
		t.Run(c.name, func(t *testing.T) {
			br := testBreaker(5)
			var b chsink.Buffer[testRow]
			b.Put("a", testRow{"a", 1})
			b.Put("b", testRow{"b", 2})
			err := b.Flush(ctx, c.conn, br, "INSERT x", appendTestRow)
			if !errors.Is(err, sendErr) || err.Error() != c.want {
				t.Fatalf("Flush = %v, want %q", err, c.want)
			}
			if b.Len() != 2 {
				t.Fatalf("%d rows after a failed Flush, want 2", b.Len())
			}
			// A redelivery still replaces rather than adds, and a retry
			// sends every row once.
			b.Put("a", testRow{"a", 3})
			c.conn.prepareErr, c.conn.appendErr, c.conn.sendErr = nil, nil, nil
			if err := b.Flush(ctx, c.conn, br, "INSERT x", appendTestRow); err != nil {
				t.Fatal(err)
			}
			want := [][]any{{[]any{"a", 3}, []any{"b", 2}}}
			if !reflect.DeepEqual(c.conn.sent, want) || b.Len() != 0 {
				t.Fatalf("retry sent %v leaving %d rows, want %v and none", c.conn.sent, b.Len(), want)
			}
		})
	}
}

func TestBufferFlushGoesThroughTheBreaker(t *testing.T) {
	ctx := context.Background()
	conn := &fakeConn{sendErr: errors.New("down")}
	br := testBreaker(2)
	var b chsink.Buffer[testRow]
	b.Add("a", testRow{"a", 1})
	for i := 0; i < 2; i++ {
		if err := b.Flush(ctx, conn, br, "INSERT x", appendTestRow); err == nil {
			t.Fatal("Flush succeeded with Send failing")
		}
	}
	err := b.Flush(ctx, conn, br, "INSERT x", appendTestRow)
	if !errors.Is(err, breaker.ErrOpen) || !strings.HasPrefix(err.Error(), "insert 1 rows: ") {
		t.Fatalf("third Flush = %v, want insert 1 rows wrapping ErrBreakerOpen", err)
	}
	if conn.prepares != 2 || b.Len() != 1 {
		t.Fatalf("%d batches prepared, %d rows buffered; want 2 and 1", conn.prepares, b.Len())
	}
}
