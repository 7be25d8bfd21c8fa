// Package pageviews is the stage that writes the anonymous page views sent
// by track.js to ClickHouse for website analytics: it reads
// pageview.recorded.v1 envelopes from the page-view topic, buffers one row
// per view and inserts each buffer in one batch when the runner flushes.
//
// Exactly once for readers, as for events: one row per id in the buffer, a
// ReplacingMergeTree table, and queries through LIMIT 1 BY id.
package pageviews

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/breaker"
	chsink "sendstream/sinks/clickhouse"
)

// Name is the stage's registered name (and so its consumer group's).
const Name = "pageviews"

//go:embed insert.sql
var insertSQL string

func init() {
	pipeline.Register(pipeline.Spec[Config]{
		Name:     Name,
		Consumes: schemas.TopicPageViews,
		Defaults: Config{},
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

// Stage buffers page-view rows in Handle and inserts them in Flush. The
// runner calls Handle and Flush from one goroutine; the buffer's mutex
// guards it regardless.
type Stage struct {
	conn    driver.Conn
	breaker *breaker.Breaker
	buf     chsink.Buffer[row] // one row per view id, the first copy
}

var (
	_ pipeline.Stage   = (*Stage)(nil)
	_ pipeline.Flusher = (*Stage)(nil)
)

// New builds the stage on r.ClickHouse (required).
func New(ctx context.Context, r pipeline.Resources, cfg Config) (*Stage, error) {
	if r.ClickHouse == nil {
		return nil, errors.New("pageviews: needs ClickHouse")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pageviews: build: %w", err)
	}
	return &Stage{conn: r.ClickHouse, breaker: cfg.Breaker.New("clickhouse_page_views")}, nil
}

// row is one page_views row, in the column order of insert.sql.
type row struct {
	id, workspace                     string
	at                                time.Time
	host, path, title, referrer       string
	utmSource, utmMedium, utmCampaign string
	screenWidth                       uint16
	userAgent                         string
}

// Handle decodes one pageview.recorded.v1 envelope and buffers its row.
// Other types are ignored; a malformed envelope is a pipeline.Permanent
// error.
func (s *Stage) Handle(_ context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	if env.Type != schemas.TypePageViewed {
		return nil, nil
	}
	var p schemas.PageViewPayload
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("pageviews: envelope %s: decode payload: %w", env.ID, err))
	}
	if env.ID == "" || env.Workspace == "" || p.OccurredAt.Unix() < 1 || p.OccurredAt.Unix() >= 1<<32 {
		return nil, pipeline.Permanent(fmt.Errorf("pageviews: envelope %q: missing id or workspace, or time out of range", env.ID))
	}
	width := p.ScreenWidth
	if width < 0 || width > 65535 {
		width = 0
	}
	s.buf.Add(env.ID, row{
		id: env.ID, workspace: env.Workspace, at: p.OccurredAt.UTC(), host: p.Host, path: p.Path, title: p.Title,
		referrer: p.ReferrerHost, utmSource: p.UTMSource, utmMedium: p.UTMMedium, utmCampaign: p.UTMCampaign,
		screenWidth: uint16(width), userAgent: p.UserAgent,
	})
	return nil, nil
}

// Flush inserts every buffered row in one batch and empties the buffer only
// when the insert succeeded.
func (s *Stage) Flush(ctx context.Context) error {
	now := time.Now().UTC()
	err := s.buf.Flush(ctx, s.conn, s.breaker, insertSQL, func(b driver.Batch, rows []row) error {
		return chsink.AppendColumns(b,
			chsink.Column(rows, func(r *row) string { return r.id }),
			chsink.Column(rows, func(r *row) string { return r.workspace }),
			chsink.Column(rows, func(r *row) time.Time { return r.at }),
			chsink.Column(rows, func(r *row) string { return r.host }),
			chsink.Column(rows, func(r *row) string { return r.path }),
			chsink.Column(rows, func(r *row) string { return r.title }),
			chsink.Column(rows, func(r *row) string { return r.referrer }),
			chsink.Column(rows, func(r *row) string { return r.utmSource }),
			chsink.Column(rows, func(r *row) string { return r.utmMedium }),
			chsink.Column(rows, func(r *row) string { return r.utmCampaign }),
			chsink.Column(rows, func(r *row) uint16 { return r.screenWidth }),
			chsink.Column(rows, func(r *row) string { return r.userAgent }),
			chsink.Column(rows, func(*row) time.Time { return now }),
		)
	})
	if err != nil {
		return fmt.Errorf("pageviews: %w", err)
	}
	return nil
}
