// Package messagelog is the stage that writes every status change of a
// transactional message to ClickHouse (table message_status): a queued row
// for each transactional.send.v1 envelope and one row per
// transactional.status.v1 envelope (sent, failed from the delivery stage;
// delivered, bounced, complained from provider reports). Rows are buffered in
// Handle and inserted in one batch per Flush, through a circuit breaker.
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
	"github.com/buger/jsonparser"

	"sendstream/pipeline"
	"sendstream/schemas"
	chsink "sendstream/sinks/clickhouse"
)

// Name is the stage's registered name.
const Name = "messagelog"

//go:embed insert.sql
var insertSQL string

func init() {
	pipeline.Register(pipeline.Spec[struct{}]{
		Name:          Name,
		Consumes:      schemas.TopicTransactional,
		FetchMinBytes: pipeline.BatchFetchBytes, // rows are inserted about once a second
		New: func(ctx context.Context, r pipeline.Resources, _ struct{}) (pipeline.Stage, error) {
			return New(ctx, r)
		},
	})
}

// Row is one message_status row.
type Row struct {
	EventID, Workspace, MessageID, Status string
	At                                    time.Time
	Recipient, ExternalID, TemplateID     string
	PolicyID, Provider, Detail            string
	Received                              time.Time
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

// New builds the stage on r.ClickHouse (required).
func New(ctx context.Context, r pipeline.Resources) (*Stage, error) {
	if r.ClickHouse == nil {
		return nil, errors.New("messagelog: needs ClickHouse")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("messagelog: build: %w", err)
	}
	return &Stage{conn: r.ClickHouse, breaker: pipeline.NewBreaker("clickhouse message_status")}, nil
}

// sendFields are the parts of a send payload the log needs (decoding skips
// the bodies and attachments without allocating them).
type sendFields struct {
	To, ExternalID, TemplateID string
	Policy                     schemas.PolicyRef
}

// errSendFieldsRead stops the member scan of decodeSendFields.
var errSendFieldsRead = errors.New("send fields read")

// decodeSendFields reads the fields the log needs from a send payload and
// stops at the first Liquid source ("subject"): schemas.SendPayload puts
// the small fields first, so the bodies and attachments are never scanned.
func decodeSendFields(payload []byte) (sendFields, error) {
	var p sendFields
	err := jsonparser.ObjectEach(payload, func(k, v []byte, t jsonparser.ValueType, _ int) error {
		switch string(k) {
		case "to":
			return sendString(&p.To, "to", v, t)
		case "externalId":
			return sendString(&p.ExternalID, "externalId", v, t)
		case "templateId":
			return sendString(&p.TemplateID, "templateId", v, t)
		case "policy":
			if t != jsonparser.Object {
				return errors.New("policy is not an object")
			}
			pol, err := schemas.DecodePolicyRef(v)
			p.Policy = pol
			return err
		case "subject", "preheader", "html", "text", "data", "contact", "attachments":
			return errSendFieldsRead
		}
		return nil
	})
	if err != nil && !errors.Is(err, errSendFieldsRead) {
		return p, fmt.Errorf("send payload: %w", err)
	}
	return p, nil
}

// sendString unescapes the string member name of a send payload into dst
// (null leaves it empty).
func sendString(dst *string, name string, v []byte, t jsonparser.ValueType) error {
	switch t {
	case jsonparser.Null:
		return nil
	case jsonparser.String:
		s, err := jsonparser.ParseString(v)
		*dst = s
		return err
	}
	return fmt.Errorf("%s is not a string", name)
}

// Decode turns an envelope into its row; ok false for envelope types that
// are not status changes.
func Decode(env schemas.Envelope, now time.Time) (Row, bool, error) {
	r := Row{EventID: env.ID, Workspace: env.Workspace, Received: now.UTC()}
	switch env.Type {
	case schemas.TypeTransactionalSend:
		p, err := decodeSendFields(env.Payload)
		if err != nil {
			return r, false, fmt.Errorf("messagelog: envelope %s: %w", env.ID, err)
		}
		r.MessageID, r.Status, r.At = env.ID, schemas.MessageQueued, env.OccurredAt.UTC()
		r.Recipient, r.ExternalID, r.TemplateID, r.PolicyID, r.Provider = p.To, p.ExternalID, p.TemplateID, p.Policy.ID, p.Policy.Provider
	case schemas.TypeTransactionalStatus:
		p, err := schemas.DecodeStatusPayload(env.Payload)
		if err != nil {
			return r, false, fmt.Errorf("messagelog: envelope %s: %w", env.ID, err)
		}
		r.MessageID, r.Status, r.At = p.MessageID, p.Status, p.At.UTC()
		r.Recipient, r.ExternalID, r.TemplateID, r.PolicyID, r.Provider, r.Detail = p.To, p.ExternalID, p.TemplateID, p.PolicyID, p.Provider, p.Detail
	default:
		return r, false, nil
	}
	if r.At.Unix() < 1 || r.At.Unix() >= 1<<32 {
		return r, false, fmt.Errorf("messagelog: envelope %s: time %s out of range", env.ID, r.At)
	}
	return r, true, nil
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
