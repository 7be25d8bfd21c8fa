package contacts

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/ingest"
	"sendstream/schemas"
)

//go:embed sql/outbox_insert.sql
var sqlOutboxInsert string

// kindEnvelope is the contact_outbox kind of a row holding a whole
// envelope (outbox_insert.sql); upsert_contacts.sql writes kinds created
// and updated.
const kindEnvelope = "envelope"

// InOutbox runs write in one transaction, builds the write's events with
// announce once write succeeded, writes them into contact_outbox in the
// same transaction and commits; deadlocks and serialization failures run
// it all again (write and announce must start afresh each time). It
// returns the events and their outbox row ids: the caller publishes the
// events and then passes the ids to Published, or leaves them to the
// relay, which publishes each row as it was written (same id, causation id
// and payload). Each envelope's row belongs to its own Env.Workspace. The
// fault hook counts a commit that wrote events.
//
// This package's membership writes, sign-ups and confirmations use it, and
// so do other Postgres-backed writes whose events must not be lost between
// commit and publish (ingest/transactional's provider reports): one outbox,
// one relay.
func (s *Store) InOutbox(ctx context.Context, write func(pgx.Tx) error, announce func() []ingest.Message) ([]ingest.Message, []int64, error) {
	var msgs []ingest.Message
	var ids []int64
	err := retryTx(ctx, func() error {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
		if err := write(tx); err != nil {
			return err
		}
		msgs = announce()
		if ids, err = insertOutbox(ctx, tx, s.scope, msgs); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(msgs) > 0 {
		s.fault.committed()
	}
	return msgs, ids, nil
}

// insertOutbox writes msgs, whole envelopes, into contact_outbox within tx
// (each under its Env.Workspace, with its key's id, in scope) and returns their row
// ids (none for no msgs).
func insertOutbox(ctx context.Context, tx pgx.Tx, scope string, msgs []ingest.Message) ([]int64, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	wss := make([]string, len(msgs))
	keyIDs := make([]string, len(msgs))
	topics := make([]string, len(msgs))
	envs := make([]string, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		b, err := schemas.AppendEnvelope(nil, &m.Env)
		if err != nil {
			return nil, fmt.Errorf("encode %s for the outbox: %w", m.Env.Type, err)
		}
		wss[i] = m.Env.Workspace
		keyIDs[i] = strings.TrimPrefix(m.Env.Key, m.Env.Workspace+":")
		topics[i], envs[i] = m.Topic, string(b)
	}
	rows, err := tx.Query(ctx, sqlOutboxInsert, wss, keyIDs, topics, envs, scope)
	if err != nil {
		return nil, fmt.Errorf("write outbox: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("write outbox: %w", err)
	}
	return ids, nil
}

// outboxID is r's outbox row id, 0 when none.
func outboxID(r upsertRow) int64 {
	if r.outbox == nil {
		return 0
	}
	return *r.outbox
}

// Published tells the Store that the events of these outbox rows were
// acknowledged by the broker: their rows are deleted in the background, in
// batches (a row whose deletion is lost is published once more by the
// relay, under the same envelope id). Zero ids are ignored. Safe for
// concurrent use; it never blocks.
func (s *Store) Published(ids ...int64) {
	for _, id := range ids {
		if id != 0 {
			s.done.add(id)
		}
	}
}

// deleterQueue bounds the outbox ids waiting for deletion; beyond it ids are
// dropped and their rows left to the relay.
const deleterQueue = 1 << 16

// deleteWindow is how long the deleter collects ids before one DELETE.
const deleteWindow = 20 * time.Millisecond

// outboxDeleter deletes the outbox rows of published events, many per
// statement, off the request path.
type outboxDeleter struct {
	pool    *pgxpool.Pool
	ids     chan int64
	dropped atomic.Int64
	wg      sync.WaitGroup
}

func newOutboxDeleter(ctx context.Context, pool *pgxpool.Pool) *outboxDeleter {
	d := &outboxDeleter{pool: pool, ids: make(chan int64, deleterQueue)}
	d.wg.Add(1)
	go d.loop(ctx)
	return d
}

func (d *outboxDeleter) add(id int64) {
	select {
	case d.ids <- id:
	default:
		d.dropped.Add(1)
	}
}

// loop deletes what is queued, one statement at a time; after ctx ends it
// deletes what is left (bounded) and returns.
func (d *outboxDeleter) loop(ctx context.Context) {
	defer d.wg.Done()
	batch := make([]int64, 0, 1024)
	for {
		select {
		case id := <-d.ids:
			batch = append(batch[:0], id)
		case <-ctx.Done():
			d.drain()
			return
		}
		// Wait a little for more, then take everything queued at once: one
		// DELETE for many requests costs Postgres less than one per
		// statement batch, and sleeping through the window costs one
		// wake-up where receiving each id as it comes cost one per id.
		window := time.NewTimer(deleteWindow)
		select {
		case <-window.C:
		case <-ctx.Done():
			window.Stop()
		}
	take:
		for len(batch) < cap(batch) {
			select {
			case id := <-d.ids:
				batch = append(batch, id)
			default:
				break take
			}
		}
		d.delete(context.Background(), batch)
	}
}

// drain deletes what is still queued at close.
func (d *outboxDeleter) drain() {
	var batch []int64
	for {
		select {
		case id := <-d.ids:
			batch = append(batch, id)
			continue
		default:
		}
		break
	}
	d.delete(context.Background(), batch)
}

func (d *outboxDeleter) delete(ctx context.Context, ids []int64) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := d.pool.Exec(ctx, sqlOutboxDelete, ids); err != nil && !errors.Is(err, context.Canceled) {
		// The relay publishes these rows again, same ids: harmless.
		slog.Warn("contacts outbox: delete published rows", "rows", len(ids), "err", err)
	}
}

func (d *outboxDeleter) close() { d.wg.Wait() }

// fault is a test hook: with exitAfter > 0 the process exits (status 137,
// as after kill -9) right after its exitAfter-th committed write that wrote
// events (an upsert statement, a membership change, an unsubscribe, a
// confirmation, or any other write through InOutbox such as a provider
// report), before anything is published or answered.
type fault struct {
	exitAfter int64
	n         atomic.Int64
}

// SetFaultExitAfterCommit makes the process exit right after the n-th
// committed write with events (contacts, list memberships, anything
// through InOutbox; 0: never). Only the kill -9 tests set it
// (SENDSTREAM_FAULT_EXIT_AFTER_COMMIT).
func (s *Store) SetFaultExitAfterCommit(n int64) { s.fault.exitAfter = n }

func (f *fault) committed() {
	if f.exitAfter > 0 && f.n.Add(1) == f.exitAfter {
		os.Exit(137)
	}
}
