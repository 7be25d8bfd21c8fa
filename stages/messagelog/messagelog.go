// Package messagelog writes every status change of a transactional
// message to ClickHouse (table message_status), as two stages sharing this
// code: "messagelog" reads TopicTransactional and writes a queued row for
// each transactional.send.v1 envelope; "messagestatus" reads
// TopicMessageStatus and writes one row per transactional.status.v1
// envelope (sent, failed from the delivery stage; delivered, bounced,
// complained from provider reports). Statuses have a topic of their own so
// that the delivery stage, which consumes TopicTransactional, never reads
// them. Rows are buffered in Handle and inserted in one batch per Flush,
// through a circuit breaker.
//
// Delivery is at least once: a redelivered envelope has the same id, which
// is the row's event_id in the ReplacingMergeTree sorting key, so copies
// collapse; readers use LIMIT 1 BY event_id meanwhile.
package messagelog

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/pipeline"
	"sendstream/schemas"
	chsink "sendstream/sinks/clickhouse"
)

// Names of the two registered stages.
const (
	Name       = "messagelog"    // queued rows from TopicTransactional
	StatusName = "messagestatus" // status rows from TopicMessageStatus
)

//go:embed insert.sql
var insertSQL string

func init() {
	for name, topic := range map[string]string{Name: schemas.TopicTransactional, StatusName: schemas.TopicMessageStatus} {
		pipeline.Register(pipeline.Spec[struct{}]{
			Name:          name,
			Consumes:      topic,
			FetchMinBytes: pipeline.BatchFetchBytes, // rows are inserted about once a second
			New: func(ctx context.Context, r pipeline.Resources, _ struct{}) (pipeline.Stage, error) {
				return newStage(ctx, r, name)
			},
		})
	}
}

// Stage buffers rows in Handle and inserts them in Flush. The runner calls
// Handle and Flush from one goroutine; the buffer's mutex guards it anyway.
type Stage struct {
	conn    driver.Conn
	breaker *pipeline.Breaker
	buf     chsink.Buffer[Row] // one row per event id, the last copy
}

var (
	_ pipeline.Stage   = (*Stage)(nil)
	_ pipeline.Flusher = (*Stage)(nil)
)

// New builds the messagelog stage on r.ClickHouse (required). Either
// stage writes a row for any status change it is handed.
func New(ctx context.Context, r pipeline.Resources) (*Stage, error) {
	return newStage(ctx, r, Name)
}

// newStage builds the stage registered as name, with a breaker of its own.
func newStage(ctx context.Context, r pipeline.Resources, name string) (*Stage, error) {
	if r.ClickHouse == nil {
		return nil, errors.New(name + ": needs ClickHouse")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: build: %w", name, err)
	}
	return &Stage{conn: r.ClickHouse, breaker: pipeline.NewBreaker("clickhouse message_status " + name)}, nil
}

// Handle buffers the row of a status change; other envelopes are skipped. A
// malformed envelope is a pipeline.Permanent error.
func (s *Stage) Handle(_ context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	r, ok, err := Decode(env, time.Now())
	if err != nil {
		return nil, pipeline.Permanent(err)
	}
	if !ok {
		return nil, nil
	}
	s.buf.Put(r.EventID, r)
	return nil, nil
}

// Flush inserts the buffered rows in one batch; on error they stay buffered
// and the runner does not commit.
func (s *Stage) Flush(ctx context.Context) error {
	if err := s.buf.Flush(ctx, s.conn, s.breaker, insertSQL, appendRows); err != nil {
		return fmt.Errorf("messagelog: %w", err)
	}
	return nil
}

// appendRows appends rows to an insert.sql batch column by column, in the
// statement's column order.
func appendRows(b driver.Batch, rows []Row) error {
	return chsink.AppendColumns(b,
		chsink.Column(rows, func(r *Row) string { return r.EventID }),
		chsink.Column(rows, func(r *Row) string { return r.Workspace }),
		chsink.Column(rows, func(r *Row) string { return r.MessageID }),
		chsink.Column(rows, func(r *Row) string { return r.Status }),
		chsink.Column(rows, func(r *Row) time.Time { return r.At }),
		chsink.Column(rows, func(r *Row) string { return r.Recipient }),
		chsink.Column(rows, func(r *Row) string { return r.ExternalID }),
		chsink.Column(rows, func(r *Row) string { return r.TemplateID }),
		chsink.Column(rows, func(r *Row) string { return r.PolicyID }),
		chsink.Column(rows, func(r *Row) string { return r.Provider }),
		chsink.Column(rows, func(r *Row) string { return r.Detail }),
		chsink.Column(rows, func(r *Row) time.Time { return r.Received }),
	)
}
