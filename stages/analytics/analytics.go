// Package analytics is the stage that writes recorded events and goals to
// ClickHouse for analysis: it reads event.recorded.v1 envelopes from the
// events topic, buffers one row per event and inserts each buffer in one
// batch when the runner flushes (at 10,000 envelopes or once a second, the
// rate ClickHouse likes).
//
// Exactly once for readers: delivery is at least once, and a redelivered
// or republished event carries the same id. The buffer keeps one row per id,
// the events table is a ReplacingMergeTree whose copies collapse at merge
// time, and every query reads through LIMIT 1 BY id (ingest/events/README.md),
// so a copy that is not merged yet is never counted twice.
package analytics

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/breaker"
	chsink "sendstream/sinks/clickhouse"
)

// Name is the stage's registered name (and so its consumer group's).
const Name = "analytics"

//go:embed insert.sql
var insertSQL string

func init() {
	pipeline.Register(pipeline.Spec[Config]{
		Name:          Name,
		Consumes:      schemas.TopicEvents,
		Defaults:      Config{},
		FetchMinBytes: pipeline.BatchFetchBytes, // rows are inserted about once a second
		// DecodeEventPayload refuses whatever json.Valid refuses, so the
		// payload is not checked twice.
		UncheckedPayload: true,
		New: func(ctx context.Context, r pipeline.Resources, cfg Config) (pipeline.Stage, error) {
			return New(ctx, r, cfg)
		},
	})
}

// Config configures the stage. The zero value is the default.
type Config struct {
	// Breaker tunes the circuit breaker around ClickHouse inserts.
	Breaker breaker.Config
}

// Stage buffers event rows in Handle and inserts them in Flush. The runner
// calls Handle, Flush and Close from one goroutine; the buffer's mutex
// guards it regardless.
type Stage struct {
	conn    driver.Conn
	breaker *breaker.Breaker
	buf     chsink.Buffer[row] // one row per event id
}

var (
	_ pipeline.Stage   = (*Stage)(nil)
	_ pipeline.Flusher = (*Stage)(nil)
)

// New builds the stage on r.ClickHouse (required).
func New(ctx context.Context, r pipeline.Resources, cfg Config) (*Stage, error) {
	if r.ClickHouse == nil {
		return nil, errors.New("analytics: needs ClickHouse")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("analytics: build: %w", err)
	}
	return &Stage{conn: r.ClickHouse, breaker: cfg.Breaker.New("clickhouse_events")}, nil
}

// row is one events row, in the column order of insert.sql.
type row struct {
	id, workspace, event, contactID, emailHash, goalType string
	value                                                float64
	hasValue                                             uint8
	currency, externalID, source                         string
	occurredAt, receivedAt                               time.Time
	properties                                           string
}

// Handle decodes one event.recorded.v1 envelope and buffers its row;
// nothing is written until Flush. Other envelope types on the topic are
// ignored. A redelivery of an event still in the buffer is dropped (the
// first copy wins, as in every other stage). A malformed envelope is a
// pipeline.Permanent error.
func (s *Stage) Handle(_ context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	if env.Type != schemas.TypeEventRecorded {
		return nil, nil
	}
	r, err := decode(env)
	if err != nil {
		return nil, pipeline.Permanent(err)
	}
	s.buf.Add(r.id, r)
	return nil, nil
}

// DateTime in ClickHouse is seconds since the epoch in a UInt32.
var (
	minDateTime = time.Unix(1, 0)
	maxDateTime = time.Unix(1<<32-1, 0)
)

// decode turns an envelope into a row, or explains why it cannot.
func decode(env schemas.Envelope) (row, error) {
	if env.ID == "" || env.Workspace == "" {
		return row{}, fmt.Errorf("analytics: envelope %q: missing id or workspace", env.ID)
	}
	p, err := schemas.DecodeEventPayload(env.Payload)
	if err != nil {
		return row{}, fmt.Errorf("analytics: envelope %s: decode payload: %w", env.ID, err)
	}
	if p.Event == "" {
		return row{}, fmt.Errorf("analytics: envelope %s: no event name", env.ID)
	}
	for _, t := range []time.Time{p.OccurredAt, p.ReceivedAt} {
		if t.Before(minDateTime) || t.After(maxDateTime) {
			return row{}, fmt.Errorf("analytics: envelope %s: time %s out of range", env.ID, t)
		}
	}
	r := row{
		id: env.ID, workspace: env.Workspace, event: p.Event, contactID: p.ContactID,
		goalType: p.GoalType, currency: p.Currency, externalID: p.ExternalID, source: p.Source,
		occurredAt: p.OccurredAt.UTC(), receivedAt: p.ReceivedAt.UTC(), properties: string(p.Properties),
	}
	if p.Email != "" {
		h := sha256.Sum256([]byte(p.Email))
		r.emailHash = hex.EncodeToString(h[:])
	}
	if p.Value != "" {
		v, err := strconv.ParseFloat(p.Value, 64)
		if err != nil {
			return row{}, fmt.Errorf("analytics: envelope %s: value %q: %w", env.ID, p.Value, err)
		}
		r.value, r.hasValue = v, 1
	}
	return r, nil
}

// Flush inserts every buffered row in one batch insert and empties the
// buffer only when the insert succeeded. On error the rows stay buffered
// and the runner does not commit; a later Flush retries them.
func (s *Stage) Flush(ctx context.Context) error {
	now := time.Now().UTC()
	err := s.buf.Flush(ctx, s.conn, s.breaker, insertSQL, func(b driver.Batch, rows []row) error {
		return chsink.AppendColumns(b,
			chsink.Column(rows, func(r *row) string { return r.id }),
			chsink.Column(rows, func(r *row) string { return r.workspace }),
			chsink.Column(rows, func(r *row) string { return r.event }),
			chsink.Column(rows, func(r *row) string { return r.contactID }),
			chsink.Column(rows, func(r *row) string { return r.emailHash }),
			chsink.Column(rows, func(r *row) string { return r.goalType }),
			chsink.Column(rows, func(r *row) float64 { return r.value }),
			chsink.Column(rows, func(r *row) uint8 { return r.hasValue }),
			chsink.Column(rows, func(r *row) string { return r.currency }),
			chsink.Column(rows, func(r *row) string { return r.externalID }),
			chsink.Column(rows, func(r *row) string { return r.source }),
			chsink.Column(rows, func(r *row) time.Time { return r.occurredAt }),
			chsink.Column(rows, func(r *row) time.Time { return r.receivedAt }),
			chsink.Column(rows, func(r *row) string { return r.properties }),
			chsink.Column(rows, func(*row) time.Time { return now }),
		)
	})
	if err != nil {
		return fmt.Errorf("analytics: %w", err)
	}
	return nil
}
