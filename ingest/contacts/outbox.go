package contacts

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/ingest"
	"sendstream/schemas"
)

var (
	//go:embed sql/outbox_claim.sql
	sqlOutboxClaim string
	//go:embed sql/outbox_delete.sql
	sqlOutboxDelete string
)

// Publisher publishes envelopes to a topic and returns after the broker
// acknowledged all of them (pipeline.Publisher satisfies it).
type Publisher interface {
	Publish(ctx context.Context, topic string, envs ...schemas.Envelope) error
}

// RelayConfig tunes the outbox relay. Zero fields take the defaults.
type RelayConfig struct {
	// Grace is how old an outbox row must be before the relay publishes
	// it: longer than a request may take to publish its own events
	// (default 30 s; the request time-out is 15 s).
	Grace time.Duration
	// Interval is the pause between polls that found nothing to do
	// (default 1 s).
	Interval time.Duration
	// Batch bounds the rows claimed, published and deleted per round
	// (default 500).
	Batch int
	// Logger receives relay errors (default slog.Default()).
	Logger *slog.Logger
}

func (c RelayConfig) withDefaults() RelayConfig {
	if c.Grace <= 0 {
		c.Grace = 30 * time.Second
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Batch <= 0 {
		c.Batch = 500
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// relayRoundTimeout bounds one claim, publish and delete round.
const relayRoundTimeout = 30 * time.Second

// StartRelay starts the outbox relay of this process: a loop that publishes
// contact_outbox rows older than cfg.Grace (events whose request died,
// failed to publish or timed out after the commit) through pub and deletes
// them. Rows are claimed with FOR UPDATE SKIP LOCKED inside the round's
// transaction, so relays of several processes never publish one row twice;
// a relay dying after publishing but before its commit leaves the row to be
// published again under the same envelope id (stages dedup by env.ID).
// It stops when ctx ends (the process begins to shut down) or Close is
// called. Call it at most once, from the process serving HTTP.
func (s *Store) StartRelay(ctx context.Context, pub Publisher, cfg RelayConfig) {
	cfg = cfg.withDefaults()
	ctx, stop := context.WithCancel(ctx)
	stopWithStore := context.AfterFunc(s.batch.ctx, stop)
	s.relay.Add(1)
	go func() {
		defer s.relay.Done()
		defer stopWithStore()
		defer stop()
		for {
			n, err := s.RelayOnce(ctx, pub, cfg.Grace, cfg.Batch)
			if err != nil && ctx.Err() == nil {
				cfg.Logger.Error("contacts outbox relay", "err", err)
			}
			if n == cfg.Batch && err == nil {
				continue // more may be waiting
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(cfg.Interval):
			}
		}
	}()
}

// RelayOnce claims up to limit outbox rows older than grace, publishes
// their events through pub and deletes them, in one transaction, and
// returns how many rows it handled. The relay loop calls it; tests call it
// directly.
func (s *Store) RelayOnce(ctx context.Context, pub Publisher, grace time.Duration, limit int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, relayRoundTimeout)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("relay outbox: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
	rows, err := tx.Query(ctx, sqlOutboxClaim, grace.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("relay outbox: claim: %w", err)
	}
	var ids []int64
	var msgs []ingest.Message
	for rows.Next() {
		var id int64
		var ws, kind string
		var data, meta []byte
		if err := rows.Scan(&id, &ws, &kind, &data, &meta); err != nil {
			rows.Close()
			return 0, fmt.Errorf("relay outbox: scan: %w", err)
		}
		m, err := outboxMessages(ws, kind, data, meta)
		if err != nil {
			rows.Close()
			return 0, fmt.Errorf("relay outbox row %d: %w", id, err)
		}
		ids = append(ids, id)
		msgs = append(msgs, m...)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("relay outbox: claim: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	byTopic := map[string][]schemas.Envelope{}
	for _, m := range msgs {
		byTopic[m.Topic] = append(byTopic[m.Topic], m.Env)
	}
	for topic, envs := range byTopic {
		if err := pub.Publish(ctx, topic, envs...); err != nil {
			return 0, fmt.Errorf("relay outbox: publish %d events to %s: %w", len(envs), topic, err)
		}
	}
	if _, err := tx.Exec(ctx, sqlOutboxDelete, ids); err != nil {
		return 0, fmt.Errorf("relay outbox: delete: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("relay outbox: commit: %w", err)
	}
	return len(ids), nil
}

// outboxContact is a contacts row as to_jsonb writes it (metadata aside).
type outboxContact struct {
	ID           string          `json:"id"`
	Email        string          `json:"email"`
	FirstName    *string         `json:"first_name"`
	Country      *string         `json:"country"`
	Language     *string         `json:"language"`
	Status       string          `json:"status"`
	Source       *string         `json:"source"`
	CustomFields json.RawMessage `json:"custom_fields"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
}

// outboxMessages rebuilds the envelopes of one outbox row exactly as the
// request built them (UpsertMessages), ids included; only CausationID, the
// request id, is not kept. meta is the contact's metadata as stored.
func outboxMessages(ws, kind string, data, meta []byte) ([]ingest.Message, error) {
	var d struct {
		Contact outboxContact  `json:"contact"`
		Old     *outboxContact `json:"old"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	var r upsertRow
	r.outcome = kind
	c := d.Contact
	r.c = Contact{ID: c.ID, Email: c.Email, FirstName: c.FirstName, Country: c.Country, Language: c.Language,
		Status: c.Status, Source: c.Source, CustomFields: rawOrEmpty(c.CustomFields), Metadata: rawOrNull(meta),
		CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC()}
	if o := d.Old; o != nil {
		r.old.firstName, r.old.country, r.old.language, r.old.custom = o.FirstName, o.Country, o.Language, o.CustomFields
	}
	switch kind {
	case "created":
		return UpsertMessages(ws, "", UpsertResult{Contact: r.c, Created: true}), nil
	case "updated":
		return UpsertMessages(ws, "", UpsertResult{Contact: r.c, Changed: changedFields(r)}), nil
	}
	return nil, fmt.Errorf("unknown outbox kind %q", kind)
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
		// Wait a little for more: one DELETE for many requests costs
		// Postgres less than one per statement batch.
		window := time.NewTimer(deleteWindow)
	collect:
		for len(batch) < cap(batch) {
			select {
			case id := <-d.ids:
				batch = append(batch, id)
			case <-window.C:
				break collect
			case <-ctx.Done():
				break collect
			}
		}
		window.Stop()
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
// as after kill -9) right after its exitAfter-th committed upsert
// statement, before anything is published or answered.
type fault struct {
	exitAfter int64
	n         atomic.Int64
}

// SetFaultExitAfterCommit makes the process exit right after the n-th
// committed contacts write (0: never). Only the kill -9 tests set it
// (SENDSTREAM_FAULT_EXIT_AFTER_COMMIT).
func (s *Store) SetFaultExitAfterCommit(n int64) { s.fault.exitAfter = n }

func (f *fault) committed() {
	if f.exitAfter > 0 && f.n.Add(1) == f.exitAfter {
		os.Exit(137)
	}
}
