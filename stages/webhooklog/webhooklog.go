// Package webhooklog keeps the webhook delivery log (issue 25, item 8) in
// ClickHouse and the operator commands over it, as two stages sharing this
// code: "webhooklog" reads TopicWebhookAttempts and writes one
// webhook_attempts row per webhook.attempt.v1 envelope (every attempt the
// delivery stage makes: target, event, message id, attempt, outcome,
// status code, duration, error, next attempt time, replay flag);
// "webhookbodies" reads TopicWebhookDeliveries and writes the body of each
// message per target to webhook_messages, with the highest attempt number
// published, which is what `admin webhook replay` sends again. Rows are
// buffered in Handle and inserted in one batch per Flush, through a
// circuit breaker.
//
// Delivery is at least once: a redelivered envelope gives the same row
// (same sorting key), so copies collapse in the ReplacingMergeTree tables;
// readers deduplicate meanwhile (LIMIT 1 BY event_id, max(attempt)).
package webhooklog

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
	Name       = "webhooklog"    // attempts from TopicWebhookAttempts
	BodiesName = "webhookbodies" // message bodies from TopicWebhookDeliveries
)

var (
	//go:embed insert_attempts.sql
	insertAttemptsSQL string
	//go:embed insert_messages.sql
	insertMessagesSQL string
)

func init() {
	for name, topic := range map[string]string{Name: schemas.TopicWebhookAttempts, BodiesName: schemas.TopicWebhookDeliveries} {
		pipeline.Register(pipeline.Spec[struct{}]{
			Name:          name,
			Consumes:      topic,
			FetchMinBytes: pipeline.BatchFetchBytes, // rows are inserted about once a second
			New: func(ctx context.Context, r pipeline.Resources, _ struct{}) (pipeline.Stage, error) {
				return New(ctx, r, name)
			},
		})
	}
}

// Stage buffers rows in Handle and inserts them in Flush: attempts from
// webhook.attempt.v1 envelopes, bodies from webhook.delivery.v1 envelopes
// (either stage accepts both; each reads one topic). The runner calls
// Handle and Flush from one goroutine; the buffers' mutexes guard them
// anyway.
type Stage struct {
	name     string
	conn     driver.Conn
	breaker  *pipeline.Breaker
	attempts chsink.Buffer[AttemptRow] // one row per envelope id
	messages chsink.Buffer[MessageRow] // one row per envelope id
}

var (
	_ pipeline.Stage   = (*Stage)(nil)
	_ pipeline.Flusher = (*Stage)(nil)
)

// New builds the stage registered as name (Name or BodiesName) on
// r.ClickHouse (required), with a breaker of its own.
func New(ctx context.Context, r pipeline.Resources, name string) (*Stage, error) {
	if r.ClickHouse == nil {
		return nil, errors.New(name + ": needs ClickHouse")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: build: %w", name, err)
	}
	return &Stage{name: name, conn: r.ClickHouse, breaker: pipeline.NewBreaker("clickhouse webhook log " + name)}, nil
}

// Handle buffers the row of an attempt or of a delivery's body; other
// envelopes are skipped. A malformed envelope is a pipeline.Permanent
// error.
func (s *Stage) Handle(_ context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	switch env.Type {
	case schemas.TypeWebhookAttempt:
		r, err := DecodeAttempt(env, time.Now())
		if err != nil {
			return nil, pipeline.Permanent(err)
		}
		s.attempts.Put(r.EventID, r)
	case schemas.TypeWebhookDelivery:
		r, err := DecodeDelivery(env, time.Now())
		if err != nil {
			return nil, pipeline.Permanent(err)
		}
		s.messages.Put(r.EventID, r)
	}
	return nil, nil
}

// Flush inserts the buffered rows, one batch per table; on error they stay
// buffered and the runner does not commit.
func (s *Stage) Flush(ctx context.Context) error {
	if err := s.attempts.Flush(ctx, s.conn, s.breaker, insertAttemptsSQL, appendAttempts); err != nil {
		return fmt.Errorf("%s: webhook_attempts: %w", s.name, err)
	}
	if err := s.messages.Flush(ctx, s.conn, s.breaker, insertMessagesSQL, appendMessages); err != nil {
		return fmt.Errorf("%s: webhook_messages: %w", s.name, err)
	}
	return nil
}

// appendAttempts appends rows to an insert_attempts.sql batch column by
// column, in the statement's column order.
func appendAttempts(b driver.Batch, rows []AttemptRow) error {
	return chsink.AppendColumns(b,
		chsink.Column(rows, func(r *AttemptRow) string { return r.EventID }),
		chsink.Column(rows, func(r *AttemptRow) string { return r.Workspace }),
		chsink.Column(rows, func(r *AttemptRow) string { return r.TargetKind }),
		chsink.Column(rows, func(r *AttemptRow) string { return r.TargetID }),
		chsink.Column(rows, func(r *AttemptRow) string { return r.URL }),
		chsink.Column(rows, func(r *AttemptRow) string { return r.Event }),
		chsink.Column(rows, func(r *AttemptRow) string { return r.MessageID }),
		chsink.Column(rows, func(r *AttemptRow) uint32 { return r.Attempt }),
		chsink.Column(rows, func(r *AttemptRow) string { return r.Outcome }),
		chsink.Column(rows, func(r *AttemptRow) uint16 { return r.StatusCode }),
		chsink.Column(rows, func(r *AttemptRow) float64 { return r.DurationMs }),
		chsink.Column(rows, func(r *AttemptRow) string { return r.Error }),
		chsink.Column(rows, func(r *AttemptRow) time.Time { return r.NextAttemptAt }),
		chsink.Column(rows, func(r *AttemptRow) time.Time { return r.At }),
		chsink.Column(rows, func(r *AttemptRow) uint8 { return boolByte(r.Replay) }),
		chsink.Column(rows, func(r *AttemptRow) time.Time { return r.Received }),
	)
}

// appendMessages appends rows to an insert_messages.sql batch column by
// column, in the statement's column order.
func appendMessages(b driver.Batch, rows []MessageRow) error {
	return chsink.AppendColumns(b,
		chsink.Column(rows, func(r *MessageRow) string { return r.Workspace }),
		chsink.Column(rows, func(r *MessageRow) string { return r.TargetID }),
		chsink.Column(rows, func(r *MessageRow) string { return r.MessageID }),
		chsink.Column(rows, func(r *MessageRow) string { return r.TargetKind }),
		chsink.Column(rows, func(r *MessageRow) string { return r.URL }),
		chsink.Column(rows, func(r *MessageRow) string { return r.Event }),
		chsink.Column(rows, func(r *MessageRow) time.Time { return r.FirstAt }),
		chsink.Column(rows, func(r *MessageRow) uint32 { return r.Attempt }),
		chsink.Column(rows, func(r *MessageRow) string { return r.Body }),
		chsink.Column(rows, func(r *MessageRow) time.Time { return r.Received }),
	)
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
