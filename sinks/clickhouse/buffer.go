package clickhouse

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/sinks/breaker"
)

// Buffer holds the rows a pipeline stage inserts into ClickHouse in one
// batch, at most one row per id (the envelope id, so a redelivery does not
// add a second row). A mutex guards it, so Add, Put, Len, Rows and Flush may
// be called from any goroutine. The zero value is an empty buffer.
type Buffer[R any] struct {
	mu   sync.Mutex
	rows []R
	ids  []string // ids[i] is the id of rows[i]
	// seen maps an id's hash to its index in rows: a fixed-size key is
	// cheaper to hash and compare than the id. ids confirms a hit; an id
	// whose hash is taken by another (a 64-bit collision) goes to clash.
	seen  map[uint64]int
	clash map[string]int
	seed  maphash.Seed
}

// Add buffers r under id unless a row with that id is buffered already (the
// first copy wins); it reports whether r was added.
func (b *Buffer[R]) Add(id string, r R) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, _, dup, taken := b.slot(id)
	if dup {
		return false
	}
	b.push(id, h, taken, r)
	return true
}

// Put buffers r under id, replacing the buffered row with that id if there
// is one (the last copy wins, in the first copy's place); it reports whether
// id was new.
func (b *Buffer[R]) Put(id string, r R) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, i, dup, taken := b.slot(id)
	if dup {
		b.rows[i] = r
		return false
	}
	b.push(id, h, taken, r)
	return true
}

// slot hashes id and returns its row index when it is buffered; taken says
// whether the hash is in seen (id's own, or another id's on a collision).
// b.mu is held.
func (b *Buffer[R]) slot(id string) (h uint64, i int, ok, taken bool) {
	if b.seen == nil {
		b.seed = maphash.MakeSeed()
		b.seen = map[uint64]int{}
	}
	h = maphash.String(b.seed, id)
	i, taken = b.seen[h]
	if taken && b.ids[i] == id {
		return h, i, true, true
	}
	if taken {
		i, ok = b.clash[id]
	}
	return h, i, ok, taken
}

// push appends r under a new id, with slot's h and taken; b.mu is held.
func (b *Buffer[R]) push(id string, h uint64, taken bool, r R) {
	if taken {
		if b.clash == nil {
			b.clash = map[string]int{}
		}
		b.clash[id] = len(b.rows)
	} else {
		b.seen[h] = len(b.rows)
	}
	b.rows = append(b.rows, r)
	b.ids = append(b.ids, id)
}

// Len returns how many rows are buffered.
func (b *Buffer[R]) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.rows)
}

// Rows returns a copy of the buffered rows in the order their ids were first
// added.
func (b *Buffer[R]) Rows() []R {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]R(nil), b.rows...)
}

// Flush inserts every buffered row in one native batch insert (sql, with
// appendRows appending the rows to the batch), run through br, and
// empties the buffer only when the insert succeeded. On error the rows stay
// buffered for a later Flush, and the error (which wraps the breaker's, e.g.
// breaker.ErrOpen) says how many rows failed. An empty buffer is not
// sent. The buffer stays locked while the insert runs.
func (b *Buffer[R]) Flush(ctx context.Context, conn driver.Conn, br *breaker.Breaker, sql string,
	appendRows func(batch driver.Batch, rows []R) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.rows) == 0 {
		return nil
	}
	err := br.Do(ctx, func(ctx context.Context) error { return b.insert(ctx, conn, sql, appendRows) })
	if err != nil {
		return fmt.Errorf("insert %d rows: %w", len(b.rows), err)
	}
	clear(b.rows) // drop references (bodies, strings) before reusing the array
	b.rows = b.rows[:0]
	clear(b.ids)
	b.ids = b.ids[:0]
	clear(b.seen)
	clear(b.clash)
	return nil
}

// insert writes the buffered rows in one batch; b.mu is held.
func (b *Buffer[R]) insert(ctx context.Context, conn driver.Conn, sql string,
	appendRows func(batch driver.Batch, rows []R) error) error {
	batch, err := conn.PrepareBatch(ctx, sql)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer batch.Close()
	if err := appendRows(batch, b.rows); err != nil {
		return fmt.Errorf("append: %w", err)
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// reserveMin is the number of values from which reserveStrings pays off.
const reserveMin = 256

// reserveScratch holds the stand-in value reserveStrings appends.
var reserveScratch = sync.Pool{New: func() any { return new([]byte) }}

// reserveStrings sizes a String column's byte buffer for vals in one
// allocation: it appends one value as long as all of vals together and
// resets the column, which keeps the capacity. Appended value by value, the
// buffer grew by a quarter at a time on large batches, and that copying was
// a third of the bytes a request-log stage allocated. Other column types
// are left alone.
func reserveStrings(col column.Interface, vals []string) {
	s, ok := col.(*column.String)
	if !ok || s.Rows() != 0 {
		return
	}
	total := 0
	for _, v := range vals {
		total += len(v)
	}
	bp := reserveScratch.Get().(*[]byte)
	if cap(*bp) < total {
		*bp = make([]byte, total)
	}
	if s.AppendRow((*bp)[:total]) == nil {
		s.Reset()
	}
	reserveScratch.Put(bp)
}

// Column returns one column of rows, get(&rows[i]) at i, for AppendColumns.
func Column[R, T any](rows []R, get func(*R) T) []T {
	col := make([]T, len(rows))
	for i := range rows {
		col[i] = get(&rows[i])
	}
	return col
}

// AppendColumns appends cols[i] (a slice with one value per row, as Column
// makes) to column i of batch: one conversion per column instead of one
// boxed value per cell, as batch.Append would do.
func AppendColumns(batch driver.Batch, cols ...any) error {
	var block []column.Interface
	for i, col := range cols {
		if vals, ok := col.([]string); ok && len(vals) >= reserveMin {
			if block == nil {
				block = batch.Columns()
			}
			if i < len(block) {
				reserveStrings(block[i], vals)
			}
		}
		if err := batch.Column(i).Append(col); err != nil {
			return fmt.Errorf("column %d: %w", i, err)
		}
	}
	return nil
}
