package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/broker"
	"sendstream/deploy/profiling"
	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/dashboard"
	"sendstream/ingest/members"
	"sendstream/ingest/oauth"
	"sendstream/ingest/webhooks"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/clickhouse"
	"sendstream/sinks/postgres"
	_ "sendstream/stages/all" // every stage registers itself
)

// roles says what one process runs.
type roles struct {
	http   bool
	stages []string // nil: none; empty non-nil: every registered stage
	demo   bool     // create and print the demo workspace (serve on the local stack)
	// clock is the journey path's time (pipeline.Resources.Clock): set
	// only by tests that run the server in their own process to move
	// time forward; the binary never sets it (nil: the real clock).
	clock pipeline.Clock
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := noFlags("serve", args); err != nil {
		return err
	}
	return runRoles(ctx, roles{http: true, stages: []string{}, demo: true}, stdout)
}

func runIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := noFlags("ingest", args); err != nil {
		return err
	}
	return runRoles(ctx, roles{http: true}, stdout)
}

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	list := fs.String("stages", "", "comma-separated stage names (default: every registered stage)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return runRoles(ctx, roles{stages: append([]string{}, split(*list)...)}, stdout)
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if err := noFlags("migrate", args); err != nil {
		return err
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	pg, ch, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	pg.Close()
	if ch != nil {
		_ = ch.Close()
	}
	return json.NewEncoder(stdout).Encode(map[string]bool{"migrated": true})
}

func noFlags(name string, args []string) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return fs.Parse(args)
}

// openStores opens Postgres and ClickHouse and applies their migrations.
func openStores(ctx context.Context, cfg Config) (*pgxpool.Pool, driver.Conn, error) {
	pg, err := postgres.Open(ctx, cfg.PostgresURL)
	if err != nil {
		return nil, nil, err
	}
	if err := postgres.Migrate(ctx, pg); err != nil {
		pg.Close()
		return nil, nil, err
	}
	if cfg.ClickHouseAddr == "" {
		return pg, nil, nil
	}
	ch, err := clickhouse.Open(ctx, cfg.ClickHouseAddr, cfg.ClickHouseDB)
	if err != nil {
		pg.Close()
		return nil, nil, err
	}
	if err := clickhouse.Migrate(ctx, ch, cfg.ClickHouseDB); err != nil {
		pg.Close()
		_ = ch.Close()
		return nil, nil, err
	}
	return pg, ch, nil
}

// runRoles wires one process: stores, broker, producer, then the HTTP edge
// and/or the stage runner, until ctx is cancelled; then it drains in order.
func runRoles(ctx context.Context, r roles, stdout io.Writer) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	slog.SetDefault(log)
	if cfg.Secret == "" {
		if cfg.Secret, err = localSecret(cfg.DataDir); err != nil {
			return err
		}
		log.Warn("SENDSTREAM_SECRET is not set; using a generated local secret", "file", filepath.Join(cfg.DataDir, "secret"))
	}
	// The outgoing-webhook settings for local development: each that is on
	// is logged as a warning, by every role (the HTTP edge checks targets
	// with them, the delivery stage dials with them).
	cfg.Webhooks.Warn(log)

	if cfg.DebugAddr != "" {
		go profiling.Serve(cfg.DebugAddr, log)
	}
	debug.SetGCPercent(cfg.GCPercent)
	debug.SetMemoryLimit(cfg.MemoryLimit)
	if len(cfg.KafkaBrokers) == 0 {
		addr, stop, err := broker.Ensure(ctx, cfg.DataDir)
		if err != nil {
			return fmt.Errorf("start local broker: %w", err)
		}
		defer stop()
		cfg.KafkaBrokers = []string{addr}
	}
	pg, ch, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer pg.Close()
	if ch != nil {
		defer ch.Close()
	}
	prod, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: cfg.KafkaBrokers, TopicPrefix: cfg.TopicPrefix, Security: cfg.Kafka})
	if err != nil {
		return err
	}
	defer prod.Close()
	if err := prod.EnsureTopics(ctx, schemas.AllTopics, 4); err != nil {
		return fmt.Errorf("create topics: %w", err)
	}

	stageContacts, closeContacts := stageContacts(pg, cfg.TopicPrefix)
	defer closeContacts()
	res := pipeline.Resources{Postgres: pg, ClickHouse: ch, Publisher: prod, Logger: log, Settings: stageSettings(cfg),
		Mailer: stageMailer(cfg, pg), Contacts: stageContacts, Clock: r.clock}
	var wg sync.WaitGroup
	errs := make(chan error, 3) // HTTP, metrics listener, pipeline
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	var srv *ingest.Server
	if r.http {
		// One listener per process hears every process's credential
		// changes (deleted keys, suspensions) and evicts them from this
		// process's credential caches; Serve waits (bounded) until it
		// listens, so a change made once /readyz answers is heard.
		inval := auth.NewListener(pg, log)
		wg.Add(1)
		go func() {
			defer wg.Done()
			inval.Run(runCtx)
		}()
		if srv, err = newHTTP(runCtx, cfg, res, ch, inval); err != nil {
			return err
		}
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		if err := inval.WaitListening(wctx); err != nil {
			log.Warn("serving before the credential invalidation listener connected: deleted keys and suspensions take effect within SENDSTREAM_KEY_CACHE_TTL until it does", "err", err)
		}
		wcancel()
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return fmt.Errorf("listen %s: %w", cfg.Listen, err)
		}
		var mln net.Listener
		if cfg.MetricsListen != "" {
			if mln, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
				_ = ln.Close()
				return fmt.Errorf("listen %s (SENDSTREAM_METRICS_LISTEN): %w", cfg.MetricsListen, err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := srv.ServeMetrics(mln); err != nil {
					errs <- fmt.Errorf("metrics listener: %w", err)
				}
			}()
			log.Info("serving metrics", "listen", mln.Addr().String())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil {
				errs <- fmt.Errorf("http: %w", err)
			}
		}()
		log.Info("serving", "listen", ln.Addr().String(), "site_url", cfg.SiteURL)
	}
	if r.stages != nil {
		stages, err := pipeline.SelectStages(r.stages...)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := pipeline.Run(runCtx, pipeline.RunConfig{
				Brokers: cfg.KafkaBrokers, Security: cfg.Kafka, TopicPrefix: cfg.TopicPrefix, Stages: stages, Resources: res,
				DrainTimeout: drainTimeout(cfg.ShutdownTimeout),
			})
			if err != nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("pipeline: %w", err)
			}
		}()
	}
	if r.demo {
		if err := printDemo(ctx, cfg, pg, stdout); err != nil {
			log.Warn("demo workspace", "err", err)
		}
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	}
	log.Info("shutting down", "bound", cfg.ShutdownTimeout.String())
	// The drain is bounded: whatever is still stuck when the bound passes
	// (a handler or a stage that does not return) is abandoned by exiting.
	// Nothing is lost by that: an accepted request was acknowledged by the
	// broker before its answer, and a stage commits offsets only after its
	// work is finished, so unfinished envelopes are read again after a
	// restart.
	hard := time.AfterFunc(cfg.ShutdownTimeout, func() {
		log.Error("shutdown bound reached with work unfinished; exiting (uncommitted envelopes are read again after a restart)",
			"bound", cfg.ShutdownTimeout.String())
		os.Exit(exitShutdownBound)
	})
	defer hard.Stop()
	cancel() // stages stop fetching, finish, flush and commit within drainTimeout
	if srv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), drainTimeout(cfg.ShutdownTimeout))
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("http shutdown", "err", err)
		}
		scancel()
	}
	wg.Wait()
	return runErr
}

// exitShutdownBound is the exit status of a process whose drain did not
// finish within its bound (SENDSTREAM_SHUTDOWN_TIMEOUT).
const exitShutdownBound = 3

// drainTimeout is the time the HTTP edge and the stages get to finish in
// flight work after a signal: four fifths of the shutdown bound, leaving
// the rest to close stores, the producer and a local broker.
func drainTimeout(bound time.Duration) time.Duration { return bound * 4 / 5 }

// newHTTP builds the HTTP edge with every feature's routes; its credential
// caches evict what inval hears.
func newHTTP(ctx context.Context, cfg Config, res pipeline.Resources, ch driver.Conn, inval *auth.Listener) (*ingest.Server, error) {
	// Members' sign-in and sessions (ingest/members): one store, so the
	// argon2id bound is the process's.
	sessions, err := members.New(res.Postgres, cfg.Members)
	if err != nil {
		return nil, err
	}
	feats := featureRoutes(ctx, cfg, res, inval)
	// Invitation emails are written to the contacts outbox with their
	// invitation: the contacts feature's store, whose relay publishes what
	// a request left behind.
	sessions.SetOutbox(feats.contacts)
	srv, err := ingest.New(ingest.Config{SiteURL: cfg.SiteURL, KeyCacheTTL: cfg.KeyCacheTTL, MetricsToken: cfg.MetricsToken}, ingest.Deps{
		PG: res.Postgres, Publisher: res.Publisher, Logger: res.Logger, Sessions: sessions,
		Ready: func(ctx context.Context) error { return ready(ctx, cfg, res.Postgres, ch) },
	})
	if err != nil {
		return nil, err
	}
	srv.SubscribeCredentials(inval)
	srv.Add(feats.routes...)
	srv.Add(members.Routes(sessions)...)
	// OAuth apps (ingest/oauth; token, revocation and discovery are in
	// featureRoutes): the consent page, which signs members in through the
	// same sessions, and the dashboard's internal /api/oauth-apps routes.
	oauthDeps := oauth.Deps{Store: oauth.NewStore(res.Postgres), SiteURL: cfg.SiteURL}
	srv.Add(oauth.AuthorizeRoutes(oauthDeps, sessions)...)
	srv.Add(oauth.DashboardRoutes(oauthDeps)...)
	// The dashboard's pages (ingest/dashboard): keys and tracking tokens
	// are deleted through the admin CLI's store, so its NOTIFY reaches
	// every process's cache; webhook endpoints are checked and encrypted
	// as the webhook-endpoint commands do (the server secret, the SSRF
	// guard with SENDSTREAM_WEBHOOK_ALLOW_PRIVATE), their deliveries read
	// from ClickHouse and replays published by this process's producer.
	hooks, err := webhooks.NewEndpoints(res.Postgres, webhooks.AdminSettings{Secret: cfg.Secret, AllowPrivate: cfg.Webhooks.AllowPrivate})
	if err != nil {
		return nil, err
	}
	srv.Add(dashboard.Routes(dashboard.Deps{Sessions: sessions, Members: sessions, Keys: auth.NewStore(res.Postgres),
		Webhooks: hooks, ClickHouse: ch, Publisher: res.Publisher,
		// OAuth apps through the store of the JSON routes above; the
		// request log and message-log chart from ClickHouse; the message
		// log from the store GET /v1/transactional reads.
		OAuth: oauthDeps.Store, Messages: feats.messages})...)
	return srv, nil
}

// ready checks every store the process depends on, for /readyz.
func ready(ctx context.Context, cfg Config, pg *pgxpool.Pool, ch driver.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := pg.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if ch != nil {
		if err := ch.Ping(ctx); err != nil {
			return fmt.Errorf("clickhouse: %w", err)
		}
	}
	var d net.Dialer
	for _, b := range cfg.KafkaBrokers {
		c, err := d.DialContext(ctx, "tcp", b)
		if err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		_ = c.Close()
	}
	return nil
}

// stageSettings are the settings stages may read from Resources.Settings.
func stageSettings(cfg Config) map[string]string {
	return map[string]string{
		"site_url":                cfg.SiteURL,
		"smtp_url":                cfg.SMTPURL,
		"secret":                  cfg.Secret,
		"topic_prefix":            cfg.TopicPrefix,
		"render_max_iterations":   strconv.FormatInt(cfg.Render.MaxIterations, 10),
		"render_max_output_bytes": strconv.FormatInt(cfg.Render.MaxOutputBytes, 10),
		"render_timeout":          cfg.Render.Timeout.String(),
		"webhook_allow_private":   prefixList(cfg.Webhooks.AllowPrivate),
		"webhook_insecure_tls":    strconv.FormatBool(cfg.Webhooks.InsecureTLS),
	}
}

// prefixList writes ranges as comma-separated CIDRs.
func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// localSecret returns the secret kept in the data dir, creating it once.
func localSecret(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "secret")
	if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
		return string(b), nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("create data dir: %w", err)
	}
	s := schemas.NewID() + schemas.NewID()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		return "", fmt.Errorf("write local secret: %w", err)
	}
	return s, nil
}

// demo is the workspace `make run` creates on first start; its key is kept
// in the data dir so later starts can print it again.
type demo struct {
	WorkspaceID string `json:"workspaceId"`
	APIKey      string `json:"apiKey"`
}

func printDemo(ctx context.Context, cfg Config, pg *pgxpool.Pool, w io.Writer) error {
	path := filepath.Join(cfg.DataDir, "demo.json")
	store := auth.NewStore(pg)
	var d demo
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &d) == nil {
		if ok, err := store.WorkspaceExists(ctx, d.WorkspaceID); err != nil || !ok {
			d = demo{}
		}
	}
	if d.WorkspaceID == "" {
		id, key, err := store.CreateWorkspace(ctx, auth.NewWorkspace{Name: "Demo", Plan: "pro"})
		if err != nil {
			return err
		}
		d = demo{WorkspaceID: id, APIKey: key}
		b, _ := json.Marshal(d)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return fmt.Errorf("save demo key: %w", err)
		}
	}
	fmt.Fprintf(w, "\nSendstream is up.\n  site:     %s\n  API:      %s/api/v1\n  OpenAPI:  %s/api/v1/openapi.json\n  metrics:  %s\n  demo workspace: %s\n  demo API key:   %s\n\nTry:\n  curl -s -H 'Authorization: Bearer %s' %s/api/v1/me\n\n",
		cfg.SiteURL, cfg.SiteURL, cfg.SiteURL, metricsWhere(cfg), d.WorkspaceID, d.APIKey, d.APIKey, cfg.SiteURL)
	return nil
}

// metricsWhere says how /metrics can be reached, for the start-up banner.
func metricsWhere(cfg Config) string {
	var where []string
	if cfg.MetricsListen != "" {
		where = append(where, "http://"+cfg.MetricsListen+"/metrics")
	}
	if cfg.MetricsToken != "" {
		where = append(where, cfg.SiteURL+"/metrics with Authorization: Bearer $SENDSTREAM_METRICS_TOKEN")
	}
	if len(where) == 0 {
		return "off (set SENDSTREAM_METRICS_LISTEN or SENDSTREAM_METRICS_TOKEN)"
	}
	return strings.Join(where, "; ")
}
