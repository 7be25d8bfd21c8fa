package ingest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"sendstream/ingest/auth"
	"sendstream/ingest/ratelimit"
	"sendstream/pipeline"
)

// Body caps of spec 8.2, by surface.
const (
	CapV1     = 16 << 20 // /api/v1/*
	CapPublic = 64 << 10 // /api/public/*
	CapMCP    = 1 << 20  // /api/mcp
	CapOther  = 1 << 20  // every other path (site root, OAuth)
	// maxBody is what fasthttp reads at most; anything larger is refused
	// with 413 before a handler runs.
	maxBody = CapV1 + 64<<10
)

// Config configures a Server. Zero fields take the defaults noted.
type Config struct {
	// SiteURL is the site root, e.g. http://127.0.0.1:8080 (served as the
	// OpenAPI server URL, {SiteURL}/api).
	SiteURL string
	// KeyCacheTTL bounds how long a deleted key, a suspension or an expiry
	// change may go unnoticed (default 5s; negative disables the cache).
	KeyCacheTTL time.Duration
	// RequestLogBodyCap caps each of the request and the response body in a
	// request-log record, after redaction (default 8 KiB; longer bodies are
	// cut and the record marked truncated).
	RequestLogBodyCap int
	// RequestTimeout bounds a handler plus the publish before answering
	// (default 15s).
	RequestTimeout time.Duration
	// LogQueue is how many request-log records of non-2xx answers may wait
	// to be published in the background (default 16384); beyond it they are
	// dropped and counted.
	LogQueue int
	// ReadTimeout bounds how long a connection may take, from the end of one
	// response, to send the next request in full, keep-alive idleness
	// included (default 60s; enforced to within a quarter, see
	// timeoutListener).
	ReadTimeout time.Duration
	// RateLimit tunes lease sizes; see package ratelimit.
	RateLimit ratelimit.Options
	// MetricsToken, when set, opens GET /metrics on the public listener to
	// requests with Authorization: Bearer <MetricsToken> (401 without it);
	// when empty the public /metrics answers 404. ServeMetrics serves the
	// metrics on a separate listener instead.
	MetricsToken string
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	if c.RequestLogBodyCap < 0 || c.LogQueue < 0 || c.RequestTimeout < 0 {
		return errors.New("ingest config: negative cap, queue or timeout")
	}
	if c.KeyCacheTTL > time.Minute {
		return errors.New("ingest config: KeyCacheTTL above 1m defeats deletion and suspension")
	}
	return nil
}

func (c *Config) withDefaults() {
	if c.SiteURL == "" {
		c.SiteURL = "http://127.0.0.1:8080"
	}
	c.SiteURL = strings.TrimRight(c.SiteURL, "/")
	if c.KeyCacheTTL == 0 {
		c.KeyCacheTTL = 5 * time.Second
	}
	if c.RequestLogBodyCap == 0 {
		c.RequestLogBodyCap = 8 << 10
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 15 * time.Second
	}
	if c.LogQueue == 0 {
		c.LogQueue = 16384
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 60 * time.Second
	}
}

// Deps are the shared clients a Server uses. PG and Publisher are required.
type Deps struct {
	PG        *pgxpool.Pool
	Publisher pipeline.Publisher
	Logger    *slog.Logger // default slog.Default()
	// Ready reports whether the process can serve (Postgres, ClickHouse,
	// Kafka); /readyz answers 503 with its error. Nil means always ready.
	Ready func(ctx context.Context) error
	// Metrics is where the HTTP metrics are registered (default
	// prometheus.DefaultRegisterer, where the producer, the stage runner
	// and the breakers register theirs too).
	Metrics prometheus.Registerer
	// Gatherer is what /metrics serves (default: Metrics when it is also a
	// Gatherer, as a *prometheus.Registry is, else
	// prometheus.DefaultGatherer, which includes the Go runtime and
	// process collectors).
	Gatherer prometheus.Gatherer
	// ExtraMetrics, when set, appends more Prometheus text to /metrics.
	ExtraMetrics func(w io.Writer)
	// Auth overrides credential resolution (default: auth.Store on PG).
	Auth auth.Resolver
	// Sessions resolves session cookies for CredSession and
	// CredKeyOrSession routes (members.Store); nil refuses every session.
	Sessions SessionResolver
}

// SessionResolver resolves the token of a session cookie. The server calls
// it concurrently, once per call that presents one.
type SessionResolver interface {
	// ResolveSession returns the member the session acts as (Kind
	// KindSession) and whether the workspace is suspended, or ErrNoSession
	// for an unknown, expired, idle or revoked session; any other error
	// answers 503.
	ResolveSession(ctx context.Context, token string, now time.Time) (p Principal, suspended bool, err error)
}

// ErrNoSession is SessionResolver's answer for a session that does not
// (or no longer) exist.
var ErrNoSession = errors.New("no such session")
