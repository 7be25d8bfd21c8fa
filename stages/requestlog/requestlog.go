// Package requestlog is the stage that writes the request log (spec 8.3) to
// ClickHouse: it reads request.logged.v1 envelopes from the request-log topic,
// buffers one row per envelope and inserts each buffer in one batch when the
// runner flushes. It also keeps the 90-day retention by dropping old daily
// partitions of request_log.
//
// Delivery is at least once. A redelivered envelope carries the same id, so it
// lands on the same sorting key of the ReplacingMergeTree table and collapses
// at the next merge; until then readers deduplicate with LIMIT 1 BY id (see
// QueryRequests).
package requestlog

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/breaker"
	chsink "sendstream/sinks/clickhouse"
)

// Name is the stage's registered name (and so its consumer group's).
const Name = "requestlog"

// BreakerName names the circuit breaker around inserts into request_log (the
// breaker label of the sendstream_breaker_* metrics).
const BreakerName = "clickhouse.request_log"

//go:embed insert.sql
var insertSQL string

func init() {
	pipeline.Register(pipeline.Spec[Config]{
		Name:          Name,
		Consumes:      schemas.TopicRequestLog,
		Defaults:      DefaultConfig(),
		FetchMinBytes: pipeline.BatchFetchBytes, // rows are inserted about once a second
		// decodePayload accepts one valid JSON value and nothing more.
		UncheckedPayload: true,
		New: func(ctx context.Context, r pipeline.Resources, cfg Config) (pipeline.Stage, error) {
			return New(ctx, r, cfg)
		},
	})
}

// Config configures the stage. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// RetentionDays is how many days of request log are kept: daily
	// partitions whose day is older than this many days are dropped.
	// Default 90 (spec 8.3).
	RetentionDays int
	// RetentionEvery is how often the retention pass runs; the first pass
	// runs when the stage starts. Default one hour.
	RetentionEvery time.Duration
	// RetentionTimeout bounds one retention pass. Default one minute.
	RetentionTimeout time.Duration
}

// DefaultConfig returns the configuration the registered stage runs with.
func DefaultConfig() Config {
	return Config{RetentionDays: 90, RetentionEvery: time.Hour, RetentionTimeout: time.Minute}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.RetentionDays < 1:
		return fmt.Errorf("requestlog: retention days %d: must be at least 1", c.RetentionDays)
	case c.RetentionEvery <= 0:
		return fmt.Errorf("requestlog: retention interval %s: must be positive", c.RetentionEvery)
	case c.RetentionTimeout <= 0:
		return fmt.Errorf("requestlog: retention timeout %s: must be positive", c.RetentionTimeout)
	}
	return nil
}

// Stage buffers request-log rows in Handle and inserts them in Flush. Build it
// with New; the runner calls Handle, Flush and Close from one goroutine at a
// time (the buffer's mutex guards it regardless).
type Stage struct {
	conn    driver.Conn
	log     *slog.Logger
	breaker *breaker.Breaker   // around every insert into request_log
	buf     chsink.Buffer[row] // one row per envelope id, the last copy

	stop      context.CancelFunc
	done      chan struct{}
	firstPass chan struct{} // closed when the start-up retention pass ended
}

var (
	_ pipeline.Stage   = (*Stage)(nil)
	_ pipeline.Flusher = (*Stage)(nil)
	_ pipeline.Closer  = (*Stage)(nil)
)

// New builds the stage on r.ClickHouse (required) and starts its retention
// goroutine, which runs until Close. ctx only bounds construction; the
// goroutine has its own context.
func New(ctx context.Context, r pipeline.Resources, cfg Config) (*Stage, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r.ClickHouse == nil {
		return nil, errors.New("requestlog: needs ClickHouse")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("requestlog: build: %w", err)
	}
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	runCtx, stop := context.WithCancel(context.Background())
	s := &Stage{
		conn:    r.ClickHouse,
		log:     log.With("stage", Name),
		breaker: breaker.New(BreakerName),
		stop:    stop,
		done:    make(chan struct{}),

		firstPass: make(chan struct{}),
	}
	go s.retain(runCtx, cfg)
	return s, nil
}

// row is one request_log row, in the column order of insert.sql.
type row struct {
	id, workspace                                   string
	at                                              time.Time
	method, path                                    string
	status                                          uint16
	durationUS                                      uint64
	keyID, keyKind, appID, memberID                 string
	requestBody, responseBody                       string
	truncated                                       uint8
	messageIDs, eventIDs, journeyRunIDs, contactIDs []string
	recipient, externalID, ip, userAgent            string
	received                                        time.Time
}

// DateTime in ClickHouse is seconds since the epoch in a UInt32.
var (
	minDateTime = time.Unix(1, 0)
	maxDateTime = time.Unix(1<<32-1, 0)
)

// Handle decodes one request.logged.v1 envelope and buffers its row; nothing
// is written until Flush. A redelivery of an envelope still in the buffer
// replaces its row. A malformed envelope is a pipeline.Permanent error.
func (s *Stage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	r, err := decode(env, time.Now())
	if err != nil {
		return nil, pipeline.Permanent(err)
	}
	s.buf.Put(r.id, r)
	return nil, nil
}

// decode turns an envelope into a row, or explains why it cannot.
func decode(env schemas.Envelope, now time.Time) (row, error) {
	if env.Type != schemas.TypeRequestLogged {
		return row{}, fmt.Errorf("requestlog: envelope %s: type %q, want %q", env.ID, env.Type, schemas.TypeRequestLogged)
	}
	if env.ID == "" || env.Workspace == "" {
		return row{}, fmt.Errorf("requestlog: envelope %q: missing id or workspace", env.ID)
	}
	var p schemas.RequestLog
	if err := decodePayload(env.Payload, &p); err != nil {
		return row{}, fmt.Errorf("requestlog: envelope %s: decode payload: %w", env.ID, err)
	}
	switch {
	case p.At.Before(minDateTime) || p.At.After(maxDateTime):
		return row{}, fmt.Errorf("requestlog: envelope %s: time %s out of range", env.ID, p.At)
	case p.Method == "" || p.Path == "":
		return row{}, fmt.Errorf("requestlog: envelope %s: missing method or path", env.ID)
	case p.Status < 100 || p.Status > 599:
		return row{}, fmt.Errorf("requestlog: envelope %s: status %d out of range", env.ID, p.Status)
	case p.DurationUS < 0:
		return row{}, fmt.Errorf("requestlog: envelope %s: negative duration %d", env.ID, p.DurationUS)
	}
	var truncated uint8
	if p.Truncated {
		truncated = 1
	}
	return row{
		id:            env.ID,
		workspace:     env.Workspace,
		at:            p.At.UTC(),
		method:        p.Method,
		path:          p.Path,
		status:        uint16(p.Status),
		durationUS:    uint64(p.DurationUS),
		keyID:         p.KeyID,
		keyKind:       p.KeyKind,
		appID:         p.AppID,
		memberID:      p.MemberID,
		requestBody:   string(p.RequestBody),
		responseBody:  string(p.ResponseBody),
		truncated:     truncated,
		messageIDs:    orEmpty(p.Produced.MessageIDs),
		eventIDs:      orEmpty(p.Produced.EventIDs),
		journeyRunIDs: orEmpty(p.Produced.JourneyRunIDs),
		contactIDs:    orEmpty(p.Produced.ContactIDs),
		recipient:     p.Produced.Recipient,
		externalID:    p.Produced.ExternalID,
		ip:            p.IP,
		userAgent:     p.UserAgent,
		received:      now.UTC(),
	}, nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Flush inserts every buffered row in one batch insert, through the stage's
// circuit breaker, and empties the buffer only when the insert succeeded. On
// error (including breaker.ErrOpen while ClickHouse keeps failing)
// the rows stay buffered: a later Flush retries them, and redeliveries
// replace rather than duplicate them; the runner does not commit.
func (s *Stage) Flush(ctx context.Context) error {
	if err := s.buf.Flush(ctx, s.conn, s.breaker, insertSQL, appendRows); err != nil {
		return fmt.Errorf("requestlog: %w", err)
	}
	return nil
}

// appendRows appends rows to an insert.sql batch column by column, in the
// statement's column order.
func appendRows(batch driver.Batch, rows []row) error {
	return chsink.AppendColumns(batch,
		chsink.Column(rows, func(r *row) string { return r.id }),
		chsink.Column(rows, func(r *row) string { return r.workspace }),
		chsink.Column(rows, func(r *row) time.Time { return r.at }),
		chsink.Column(rows, func(r *row) string { return r.method }),
		chsink.Column(rows, func(r *row) string { return r.path }),
		chsink.Column(rows, func(r *row) uint16 { return r.status }),
		chsink.Column(rows, func(r *row) uint64 { return r.durationUS }),
		chsink.Column(rows, func(r *row) string { return r.keyID }),
		chsink.Column(rows, func(r *row) string { return r.keyKind }),
		chsink.Column(rows, func(r *row) string { return r.appID }),
		chsink.Column(rows, func(r *row) string { return r.memberID }),
		chsink.Column(rows, func(r *row) string { return r.requestBody }),
		chsink.Column(rows, func(r *row) string { return r.responseBody }),
		chsink.Column(rows, func(r *row) uint8 { return r.truncated }),
		chsink.Column(rows, func(r *row) []string { return r.messageIDs }),
		chsink.Column(rows, func(r *row) []string { return r.eventIDs }),
		chsink.Column(rows, func(r *row) []string { return r.journeyRunIDs }),
		chsink.Column(rows, func(r *row) []string { return r.contactIDs }),
		chsink.Column(rows, func(r *row) string { return r.recipient }),
		chsink.Column(rows, func(r *row) string { return r.externalID }),
		chsink.Column(rows, func(r *row) string { return r.ip }),
		chsink.Column(rows, func(r *row) string { return r.userAgent }),
		chsink.Column(rows, func(r *row) time.Time { return r.received }),
	)
}

// Close stops the retention goroutine and waits for it. Rows not flushed are
// dropped; their offsets were not committed, so they are read again.
func (s *Stage) Close() error {
	s.stop()
	<-s.done
	return nil
}
