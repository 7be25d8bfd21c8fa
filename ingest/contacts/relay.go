package contacts

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"sendstream/ingest"
	"sendstream/schemas"
	"sendstream/sinks/relayloop"
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
		relayloop.Run(ctx, relayloop.Config{Name: "contacts outbox relay", Batch: cfg.Batch, Interval: cfg.Interval, Logger: cfg.Logger},
			func(ctx context.Context) (int, error) { return s.RelayOnce(ctx, pub, cfg.Grace, cfg.Batch) })
	}()
}

// RelayOnce claims up to limit outbox rows older than grace, publishes
// their events through pub and deletes them, in one transaction, and
// returns how many rows it handled. The relay loop calls it; tests call it
// directly.
func (s *Store) RelayOnce(ctx context.Context, pub Publisher, grace time.Duration, limit int) (int, error) {
	return s.relayOnce(ctx, pub, "", grace, limit)
}

// RelayWorkspaceOnce is RelayOnce limited to the rows of workspace ws: tests
// sharing one database relay only what they wrote, never another test's
// rows to their own broker.
func (s *Store) RelayWorkspaceOnce(ctx context.Context, pub Publisher, ws string, grace time.Duration, limit int) (int, error) {
	if ws == "" {
		return 0, fmt.Errorf("relay outbox: no workspace")
	}
	return s.relayOnce(ctx, pub, ws, grace, limit)
}

// relayOnce is one relay round over the rows of ws ("": every workspace).
func (s *Store) relayOnce(ctx context.Context, pub Publisher, ws string, grace time.Duration, limit int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, relayRoundTimeout)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("relay outbox: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
	rows, err := tx.Query(ctx, sqlOutboxClaim, grace.Seconds(), limit, ws, s.scope)
	if err != nil {
		return 0, fmt.Errorf("relay outbox: claim: %w", err)
	}
	var ids []int64
	var msgs []ingest.Message
	for rows.Next() {
		var id int64
		var ws, kind string
		var data, meta []byte
		var c outboxContact
		if err := rows.Scan(&id, &ws, &kind, &data, &meta, &c.contactID, &c.rid, &c.email, &c.firstName, &c.country, &c.language,
			&c.status, &c.source, &c.custom, &c.createdAt, &c.updatedAt); err != nil {
			rows.Close()
			return 0, fmt.Errorf("relay outbox: scan: %w", err)
		}
		m, err := outboxMessages(ws, kind, data, meta, &c)
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

// outboxRow is the data of a contact_outbox row. Rows of a contact upsert
// (kind created or updated) hold the values before an update (Old); those
// written before 0088_contact_outbox_columns.sql also hold the contact as
// it was written and the request id. Rows of kind envelope hold one whole
// envelope.
type outboxRow struct {
	RequestID string   `json:"rid"`
	Contact   Contact  `json:"contact"`
	Old       *Contact `json:"old"`
	Topic     string   `json:"topic"`
	Envelope  string   `json:"envelope"`
}

// outboxContact is the contact as a contact upsert's outbox row holds it in
// columns (0088_contact_outbox_columns.sql); email is nil in rows written
// before them and in rows of kind envelope.
type outboxContact struct {
	contactID                                                string
	rid, email, firstName, country, language, status, source *string
	custom                                                   []byte
	createdAt, updatedAt                                     *time.Time
}

// apply puts the columns' contact and request id into d, when the row has
// them.
func (c *outboxContact) apply(d *outboxRow) {
	if c == nil || c.email == nil {
		return
	}
	d.RequestID = deref(c.rid)
	d.Contact = Contact{ID: c.contactID, Email: *c.email, FirstName: c.firstName, Country: c.country, Language: c.language,
		Status: deref(c.status), Source: c.source, CustomFields: c.custom}
	if c.createdAt != nil && c.updatedAt != nil {
		d.Contact.CreatedAt, d.Contact.UpdatedAt = *c.createdAt, *c.updatedAt
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// outboxMessages rebuilds the envelopes of one outbox row exactly as the
// request built them: an upsert's through UpsertMessages (ids and causation
// id included; meta is the contact's metadata as stored; c the columns of
// the row, nil or without email for a row holding everything in data), a
// written envelope as it was written.
func outboxMessages(ws, kind string, data, meta []byte, c *outboxContact) ([]ingest.Message, error) {
	var d outboxRow
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if kind == kindEnvelope {
		var env schemas.Envelope
		if err := schemas.DecodeEnvelope([]byte(d.Envelope), &env); err != nil {
			return nil, fmt.Errorf("decode envelope: %w", err)
		}
		return []ingest.Message{{Topic: d.Topic, Env: env}}, nil
	}
	c.apply(&d)
	r := upsertRow{outcome: kind, c: d.Contact}
	r.c.CustomFields, r.c.Metadata = rawOrEmpty(r.c.CustomFields), rawOrNull(meta)
	r.c.CreatedAt, r.c.UpdatedAt = r.c.CreatedAt.UTC(), r.c.UpdatedAt.UTC()
	if o := d.Old; o != nil {
		r.old.firstName, r.old.country, r.old.language, r.old.custom = o.FirstName, o.Country, o.Language, o.CustomFields
	}
	switch kind {
	case "created":
		return UpsertMessages(ws, d.RequestID, UpsertResult{Contact: r.c, Created: true}), nil
	case "updated":
		return UpsertMessages(ws, d.RequestID, UpsertResult{Contact: r.c, Changed: changedFields(r)}), nil
	}
	return nil, fmt.Errorf("unknown outbox kind %q", kind)
}
