package main

import (
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sendstream/deploy/stack"
	"sendstream/ingest/members"
	"sendstream/pipeline"
	"sendstream/sinks/email/render"
	"sendstream/sinks/webhook"
)

// Config is every setting of the binary, read from the environment in this
// one place. Defaults suit the local stack that `make run` starts.
type Config struct {
	Listen         string        // SENDSTREAM_LISTEN
	SiteURL        string        // SENDSTREAM_SITE_URL
	PostgresURL    string        // SENDSTREAM_POSTGRES_URL
	ClickHouseAddr string        // SENDSTREAM_CLICKHOUSE_ADDR (native protocol)
	ClickHouseDB   string        // SENDSTREAM_CLICKHOUSE_DB
	KafkaBrokers   []string      // SENDSTREAM_KAFKA_BROKERS; empty starts a local broker process
	TopicPrefix    string        // SENDSTREAM_TOPIC_PREFIX
	SMTPURL        string        // SENDSTREAM_SMTP_URL
	Secret         string        // SENDSTREAM_SECRET: signs confirmation and unsubscribe links
	LogLevel       slog.Level    // SENDSTREAM_LOG_LEVEL
	KeyCacheTTL    time.Duration // SENDSTREAM_KEY_CACHE_TTL; negative disables the cache
	DataDir        string        // SENDSTREAM_DATA_DIR
	DebugAddr      string        // SENDSTREAM_DEBUG_ADDR: pprof listener, off when empty
	GCPercent      int           // SENDSTREAM_GC_PERCENT: Go GC target (as GOGC)
	MemoryLimit    int64         // SENDSTREAM_MEMORY_LIMIT_MB, in bytes: soft limit of the Go heap
	// Kafka is the TLS and SASL setting of every Kafka client of the
	// process: SENDSTREAM_KAFKA_TLS, SENDSTREAM_KAFKA_TLS_CA_FILE,
	// SENDSTREAM_KAFKA_TLS_CERT_FILE, SENDSTREAM_KAFKA_TLS_KEY_FILE,
	// SENDSTREAM_KAFKA_SASL_MECHANISM, SENDSTREAM_KAFKA_SASL_USERNAME and
	// SENDSTREAM_KAFKA_SASL_PASSWORD (see kafkaSecurity).
	Kafka pipeline.KafkaSecurity
	// Render bounds every Liquid render (send check, validate, delivery):
	// SENDSTREAM_RENDER_MAX_ITERATIONS (default 1000000),
	// SENDSTREAM_RENDER_MAX_OUTPUT_BYTES (default 5242880) and
	// SENDSTREAM_RENDER_TIMEOUT (default 2s).
	Render render.Budget
	// ShutdownTimeout (SENDSTREAM_SHUTDOWN_TIMEOUT, default 25s, under
	// Kubernetes' 30 s grace period) bounds the drain after SIGTERM or
	// SIGINT: the process exits by then even if work is stuck.
	ShutdownTimeout time.Duration
	// /metrics is off on the public listener by default. MetricsListen
	// (SENDSTREAM_METRICS_LISTEN, e.g. 127.0.0.1:9090) serves it, without a
	// token, on a separate address; MetricsToken (SENDSTREAM_METRICS_TOKEN,
	// at least 16 characters) opens GET /metrics on the public listener to
	// Authorization: Bearer <token>.
	MetricsListen string
	MetricsToken  string
	// OutboxGrace (SENDSTREAM_OUTBOX_GRACE, default 30s, at least 1s) is
	// how old a contacts outbox row (a contacts, list or provider report
	// event) must be before the relay publishes it: longer than a request
	// may take to publish its own events.
	OutboxGrace time.Duration
	// FaultExitAfterCommit (SENDSTREAM_FAULT_EXIT_AFTER_COMMIT, default 0:
	// off) is a hook of the kill -9 tests only: the process exits right
	// after its N-th committed write with outbox events (contacts, list
	// memberships, provider reports), before publishing.
	FaultExitAfterCommit int64
	// Webhooks are the outgoing-webhook settings for local development
	// and tests: SENDSTREAM_WEBHOOK_ALLOW_PRIVATE (comma-separated CIDRs
	// the SSRF guard lets through) and SENDSTREAM_WEBHOOK_INSECURE_TLS=1
	// (accept self-signed receiver certificates). Both default to off;
	// serve logs a warning for each that is on.
	Webhooks webhook.Outbound
	// Members tunes sign-in and sessions (ingest/members):
	// SENDSTREAM_PASSWORD_HASH_CONCURRENCY (argon2id hashes at once,
	// default 2), SENDSTREAM_SESSION_MAX_AGE (default 336h),
	// SENDSTREAM_SESSION_IDLE (default 48h),
	// SENDSTREAM_LOGIN_ACCOUNT_FAILURES (default 10),
	// SENDSTREAM_LOGIN_ADDRESS_FAILURES (default 100) and
	// SENDSTREAM_LOGIN_FAILURE_WINDOW (default 15m).
	Members members.Config
}

// loadConfig reads the environment, filling connection settings the
// environment leaves empty from the local stack's .run/stack.env.
func loadConfig() (Config, error) {
	c := Config{
		Listen:         env("SENDSTREAM_LISTEN", "127.0.0.1:8080"),
		PostgresURL:    os.Getenv("SENDSTREAM_POSTGRES_URL"),
		ClickHouseAddr: os.Getenv("SENDSTREAM_CLICKHOUSE_ADDR"),
		ClickHouseDB:   env("SENDSTREAM_CLICKHOUSE_DB", "sendstream"),
		KafkaBrokers:   split(os.Getenv("SENDSTREAM_KAFKA_BROKERS")),
		TopicPrefix:    os.Getenv("SENDSTREAM_TOPIC_PREFIX"),
		SMTPURL:        env("SENDSTREAM_SMTP_URL", "smtp://127.0.0.1:1025"),
		Secret:         os.Getenv("SENDSTREAM_SECRET"),
		DataDir:        env("SENDSTREAM_DATA_DIR", ".run"),
		DebugAddr:      os.Getenv("SENDSTREAM_DEBUG_ADDR"),
		MetricsListen:  os.Getenv("SENDSTREAM_METRICS_LISTEN"),
		MetricsToken:   os.Getenv("SENDSTREAM_METRICS_TOKEN"),
	}
	if c.MetricsToken != "" && len(c.MetricsToken) < 16 {
		return c, fmt.Errorf("SENDSTREAM_METRICS_TOKEN: want at least 16 characters")
	}
	c.SiteURL = strings.TrimRight(env("SENDSTREAM_SITE_URL", "http://"+c.Listen), "/")
	if _, err := url.Parse(c.SiteURL); err != nil {
		return c, fmt.Errorf("SENDSTREAM_SITE_URL: %w", err)
	}
	if err := c.LogLevel.UnmarshalText([]byte(env("SENDSTREAM_LOG_LEVEL", "info"))); err != nil {
		return c, fmt.Errorf("SENDSTREAM_LOG_LEVEL: %w", err)
	}
	ttl, err := time.ParseDuration(env("SENDSTREAM_KEY_CACHE_TTL", "5s"))
	if err != nil || ttl < 0 || ttl > time.Minute {
		return c, fmt.Errorf("SENDSTREAM_KEY_CACHE_TTL %q: want a duration from 0 to 1m", os.Getenv("SENDSTREAM_KEY_CACHE_TTL"))
	}
	c.KeyCacheTTL = ttl
	if c.Kafka, err = kafkaSecurity(); err != nil {
		return c, err
	}
	// A high GC target with a soft memory limit as a safety net: the heap of
	// a busy server is mostly short-lived request garbage, so collecting it
	// a quarter as often saves about a tenth of the CPU. The limit must sit
	// well above the working heap: at 100 MiB an import load spent half its
	// CPU collecting (events-import: 89 instead of 42 us per event).
	if c.GCPercent, err = strconv.Atoi(env("SENDSTREAM_GC_PERCENT", "400")); err != nil || c.GCPercent < 10 {
		return c, fmt.Errorf("SENDSTREAM_GC_PERCENT %q: want a whole number of at least 10", os.Getenv("SENDSTREAM_GC_PERCENT"))
	}
	mb, err := strconv.Atoi(env("SENDSTREAM_MEMORY_LIMIT_MB", "512"))
	if err != nil || mb < 16 {
		return c, fmt.Errorf("SENDSTREAM_MEMORY_LIMIT_MB %q: want a whole number of at least 16", os.Getenv("SENDSTREAM_MEMORY_LIMIT_MB"))
	}
	c.MemoryLimit = int64(mb) << 20
	if c.Render, err = renderBudget(); err != nil {
		return c, err
	}
	if c.ShutdownTimeout, err = time.ParseDuration(env("SENDSTREAM_SHUTDOWN_TIMEOUT", "25s")); err != nil || c.ShutdownTimeout < time.Second {
		return c, fmt.Errorf("SENDSTREAM_SHUTDOWN_TIMEOUT %q: want a duration of at least 1s", os.Getenv("SENDSTREAM_SHUTDOWN_TIMEOUT"))
	}
	if c.OutboxGrace, err = time.ParseDuration(env("SENDSTREAM_OUTBOX_GRACE", "30s")); err != nil || c.OutboxGrace < time.Second {
		return c, fmt.Errorf("SENDSTREAM_OUTBOX_GRACE %q: want a duration of at least 1s", os.Getenv("SENDSTREAM_OUTBOX_GRACE"))
	}
	if c.FaultExitAfterCommit, err = strconv.ParseInt(env("SENDSTREAM_FAULT_EXIT_AFTER_COMMIT", "0"), 10, 64); err != nil || c.FaultExitAfterCommit < 0 {
		return c, fmt.Errorf("SENDSTREAM_FAULT_EXIT_AFTER_COMMIT %q: want a whole number", os.Getenv("SENDSTREAM_FAULT_EXIT_AFTER_COMMIT"))
	}
	if c.Webhooks, err = webhook.ParseOutbound(os.Getenv("SENDSTREAM_WEBHOOK_ALLOW_PRIVATE"), os.Getenv("SENDSTREAM_WEBHOOK_INSECURE_TLS")); err != nil {
		return c, err
	}
	if c.Members, err = membersConfig(c.SiteURL); err != nil {
		return c, err
	}
	if ttl == 0 {
		c.KeyCacheTTL = -1 // ingest.Config reads 0 as "default"
	}
	if c.PostgresURL == "" || c.ClickHouseAddr == "" {
		if st, err := stack.Load(); err == nil {
			c.PostgresURL = or(c.PostgresURL, st.PostgresURL)
			c.ClickHouseAddr = or(c.ClickHouseAddr, st.ClickHouseAddr)
			if os.Getenv("SENDSTREAM_DATA_DIR") == "" && st.DataDir != "" {
				c.DataDir = st.DataDir
			}
		}
	}
	if c.PostgresURL == "" {
		return c, fmt.Errorf("SENDSTREAM_POSTGRES_URL is not set and no local stack was found (run `make run`)")
	}
	if abs, err := filepath.Abs(c.DataDir); err == nil {
		c.DataDir = abs
	}
	return c, nil
}

// membersConfig reads the sign-in and session settings.
func membersConfig(siteURL string) (members.Config, error) {
	m := members.Config{SiteURL: siteURL}
	for _, v := range []struct {
		name string
		dst  *int
	}{
		{"SENDSTREAM_PASSWORD_HASH_CONCURRENCY", &m.HashConcurrency},
		{"SENDSTREAM_LOGIN_ACCOUNT_FAILURES", &m.AccountFailures},
		{"SENDSTREAM_LOGIN_ADDRESS_FAILURES", &m.AddressFailures},
	} {
		if s := os.Getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return m, fmt.Errorf("%s %q: want a whole number of at least 1", v.name, s)
			}
			*v.dst = n
		}
	}
	for _, v := range []struct {
		name string
		dst  *time.Duration
	}{
		{"SENDSTREAM_SESSION_MAX_AGE", &m.SessionMaxAge},
		{"SENDSTREAM_SESSION_IDLE", &m.SessionIdle},
		{"SENDSTREAM_LOGIN_FAILURE_WINDOW", &m.FailureWindow},
	} {
		if s := os.Getenv(v.name); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d < time.Second {
				return m, fmt.Errorf("%s %q: want a duration of at least 1s", v.name, s)
			}
			*v.dst = d
		}
	}
	return m, m.Validate()
}

// renderBudget reads the render budget's three variables.
func renderBudget() (render.Budget, error) {
	b := render.DefaultBudget()
	for _, v := range []struct {
		name string
		dst  *int64
	}{{"SENDSTREAM_RENDER_MAX_ITERATIONS", &b.MaxIterations}, {"SENDSTREAM_RENDER_MAX_OUTPUT_BYTES", &b.MaxOutputBytes}} {
		if s := os.Getenv(v.name); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 1 {
				return b, fmt.Errorf("%s %q: want a whole number of at least 1", v.name, s)
			}
			*v.dst = n
		}
	}
	if s := os.Getenv("SENDSTREAM_RENDER_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Millisecond {
			return b, fmt.Errorf("SENDSTREAM_RENDER_TIMEOUT %q: want a duration of at least 1ms", s)
		}
		b.Timeout = d
	}
	return b, b.Validate()
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
