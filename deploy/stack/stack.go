// Package stack finds the local Sendstream stack (Postgres, ClickHouse and the
// Kafka-protocol broker that deploy/stack.sh runs under .run/) for tests and
// for the admin CLI, and starts it for tests when it is not running.
package stack

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5/pgxpool"

	chsink "sendstream/sinks/clickhouse"
	pgsink "sendstream/sinks/postgres"
)

// Env says where the stack's services are.
type Env struct {
	PostgresURL    string // SENDSTREAM_POSTGRES_URL
	ClickHouseAddr string // SENDSTREAM_CLICKHOUSE_ADDR, native protocol host:port
	ClickHouseDB   string // SENDSTREAM_CLICKHOUSE_DB, default "sendstream"
	KafkaBrokers   string // SENDSTREAM_KAFKA_BROKERS, comma-separated; may be empty
	DataDir        string // SENDSTREAM_DATA_DIR made absolute, default <repo>/.run
	RepoRoot       string // directory holding go.mod; empty when not found
}

// Environ returns the settings as KEY=VALUE lines, ready to append to
// os.Environ() for a child process (a server under test).
func (e Env) Environ() []string {
	out := []string{
		"SENDSTREAM_POSTGRES_URL=" + e.PostgresURL,
		"SENDSTREAM_CLICKHOUSE_ADDR=" + e.ClickHouseAddr,
		"SENDSTREAM_CLICKHOUSE_DB=" + e.ClickHouseDB,
		"SENDSTREAM_DATA_DIR=" + e.DataDir,
	}
	if e.KafkaBrokers != "" {
		out = append(out, "SENDSTREAM_KAFKA_BROKERS="+e.KafkaBrokers)
	}
	return out
}

// Brokers returns KafkaBrokers split at commas.
func (e Env) Brokers() []string {
	var out []string
	for _, b := range strings.Split(e.KafkaBrokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// ErrNotRunning is returned (wrapped) by Load when neither the environment
// nor <data dir>/stack.env names Postgres and ClickHouse.
var ErrNotRunning = errors.New("local stack not found (run `deploy/stack.sh up` or `make run`)")

// Load reads the stack's settings: each SENDSTREAM_* variable that is set
// wins; the rest come from <data dir>/stack.env, which `deploy/stack.sh up`
// writes. The data dir is SENDSTREAM_DATA_DIR (relative to the repo root)
// or <repo root>/.run; the repo root is found by walking up from the working
// directory, then from the executable, to go.mod. Load does not check that
// the services answer. It fails with ErrNotRunning when the Postgres URL or
// the ClickHouse address is unknown; the Env is filled as far as known.
func Load() (Env, error) {
	e := Env{RepoRoot: repoRoot()}
	e.DataDir = os.Getenv("SENDSTREAM_DATA_DIR")
	if e.DataDir == "" {
		e.DataDir = ".run"
	}
	if !filepath.IsAbs(e.DataDir) {
		base := e.RepoRoot
		if base == "" {
			base, _ = os.Getwd()
		}
		e.DataDir = filepath.Join(base, e.DataDir)
	}

	file, err := readEnvFile(filepath.Join(e.DataDir, "stack.env"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return e, fmt.Errorf("stack: %w", err)
	}
	get := func(name string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return file[name]
	}
	e.PostgresURL = get("SENDSTREAM_POSTGRES_URL")
	e.ClickHouseAddr = get("SENDSTREAM_CLICKHOUSE_ADDR")
	e.ClickHouseDB = get("SENDSTREAM_CLICKHOUSE_DB")
	if e.ClickHouseDB == "" {
		e.ClickHouseDB = "sendstream"
	}
	e.KafkaBrokers = get("SENDSTREAM_KAFKA_BROKERS")
	if e.PostgresURL == "" || e.ClickHouseAddr == "" {
		return e, fmt.Errorf("stack: %w: no settings in the environment or %s",
			ErrNotRunning, filepath.Join(e.DataDir, "stack.env"))
	}
	return e, nil
}

func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		out[strings.TrimSpace(strings.TrimPrefix(k, "export "))] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// repoRoot walks up from the working directory, then from the executable's
// directory, to the first directory holding go.mod.
func repoRoot() string {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, dir := range starts {
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return ""
}

// Answering reports whether every configured service accepts TCP connections
// (Postgres, ClickHouse and, when set, each Kafka broker).
func (e Env) Answering(ctx context.Context) error {
	addrs := map[string]string{"clickhouse": e.ClickHouseAddr}
	if u, err := url.Parse(e.PostgresURL); err == nil && u.Host != "" {
		addrs["postgres"] = u.Host
	} else {
		return fmt.Errorf("stack: cannot find host:port in postgres url")
	}
	for i, b := range e.Brokers() {
		addrs[fmt.Sprintf("kafka broker %d", i)] = b
	}
	for name, a := range addrs {
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.DialContext(ctx, "tcp", a)
		if err != nil {
			return fmt.Errorf("stack: %s at %s does not answer: %w", name, a, err)
		}
		c.Close()
	}
	return nil
}

var (
	upOnce sync.Once
	upErr  error
)

// ForTest returns the stack's settings for an integration test, starting
// the local stack (`deploy/stack.sh up`, once per test process; the script
// takes a file lock, so parallel test processes are safe) when it is not
// running or has no broker. It fails the test, never skips it, when the stack
// cannot be had. Safe for concurrent use.
func ForTest(t testing.TB) Env {
	t.Helper()
	answering := func(e Env) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return e.Answering(ctx)
	}
	e, err := Load()
	if err == nil && e.KafkaBrokers != "" {
		if err = answering(e); err == nil {
			return e
		}
	}
	explicit := os.Getenv("SENDSTREAM_POSTGRES_URL") != "" && os.Getenv("SENDSTREAM_KAFKA_BROKERS") != ""
	if explicit {
		// Services named by the environment are not ours to start.
		t.Fatalf("stack: the services named by SENDSTREAM_* do not answer: %v", err)
	}
	upOnce.Do(func() { upErr = runUp(e) })
	if upErr != nil {
		t.Fatalf("stack: starting the local stack failed: %v", upErr)
	}
	e, err = Load()
	if err != nil {
		t.Fatalf("stack: after deploy/stack.sh up: %v", err)
	}
	if e.KafkaBrokers == "" {
		t.Fatalf("stack: after deploy/stack.sh up, no Kafka broker is known (see %s)", filepath.Join(e.DataDir, "stack.env"))
	}
	if err := answering(e); err != nil {
		t.Fatalf("stack: after deploy/stack.sh up: %v", err)
	}
	return e
}

func runUp(e Env) error {
	if e.RepoRoot == "" {
		return errors.New("cannot find the repo root (go.mod) to run deploy/stack.sh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(e.RepoRoot, "deploy", "stack.sh"), "up")
	cmd.Dir = e.RepoRoot
	cmd.Env = append(os.Environ(), "SENDSTREAM_DATA_DIR="+e.DataDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("deploy/stack.sh up: %w\n%s", err, out)
	}
	return nil
}

// PG returns a Postgres pool on the test stack with every migration applied;
// it is closed when the test ends.
func PG(t testing.TB) *pgxpool.Pool {
	t.Helper()
	e := ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, err := pgsink.Open(ctx, e.PostgresURL)
	if err != nil {
		t.Fatalf("stack: %v", err)
	}
	t.Cleanup(pool.Close)
	if err := pgsink.Migrate(ctx, pool); err != nil {
		t.Fatalf("stack: %v", err)
	}
	return pool
}

// CH returns a ClickHouse connection to the test stack's database with every
// migration applied; it is closed when the test ends. Its reads retry, a
// few times, ClickHouse 18.16's failure on a part a merge is replacing
// (retryConn).
func CH(t testing.TB) driver.Conn {
	t.Helper()
	e := ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := chsink.Open(ctx, e.ClickHouseAddr, e.ClickHouseDB)
	if err != nil {
		t.Fatalf("stack: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := chsink.Migrate(ctx, conn, e.ClickHouseDB); err != nil {
		t.Fatalf("stack: %v", err)
	}
	return retryConn{conn}
}

// TopicPrefix returns a topic-name prefix unique to this test (for
// SENDSTREAM_TOPIC_PREFIX or schemas.Topic* names), so parallel test
// processes sharing one broker never share topics or consumer groups.
func TopicPrefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("stack: random topic prefix: %v", err)
	}
	return "t" + hex.EncodeToString(b[:]) + "."
}

// GenericPlan returns the plan (EXPLAIN text) Postgres makes for sql under
// the settings of pgsink.LookupPool (generic plans, no sequential scans)
// while the named tables are empty, as on a fresh database: it explains the
// statement in a transaction that it rolls back, against empty copies of
// the tables (indexes included) in a scratch schema put first on the search
// path. literals are the statement's parameters as SQL literals.
func GenericPlan(t testing.TB, pool *pgxpool.Pool, tables []string, sql string, literals ...string) string {
	t.Helper()
	return GenericPlanWith(t, pool, PlanSetup{Tables: tables}, sql, literals...)
}

// PlanSetup is what GenericPlanWith plans over.
type PlanSetup struct {
	Tables []string // copied empty, indexes included, into the scratch schema
	// Fill runs after the copies are made and come first on the search
	// path (unqualified names are the copies); the copies are then
	// analyzed, so the plan is made for tables of that size.
	Fill []string
	// SeqScan leaves sequential scans on (a pool's defaults) instead of
	// pgsink.LookupPool's setting.
	SeqScan bool
	// Unanalyzed are tables of Tables filled but left without statistics,
	// as a table is before autovacuum first analyzes it (a fresh database
	// filling up): the planner then guesses from the table's size alone.
	Unanalyzed []string
}

// without is the names of all not in drop, in order.
func without(all, drop []string) []string {
	var out []string
	for _, n := range all {
		if !slices.Contains(drop, n) {
			out = append(out, n)
		}
	}
	return out
}

// GenericPlanWith is GenericPlan over setup: the copies filled and analyzed
// first when setup.Fill is set.
func GenericPlanWith(t testing.TB, pool *pgxpool.Pool, setup PlanSetup, sql string, literals ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatalf("stack: generic plan: %v", err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatalf("stack: generic plan: %v", err)
	}
	defer func() {
		// A prepared statement outlives its transaction.
		_ = tx.Rollback(context.Background())
		_, _ = conn.Exec(context.Background(), "DEALLOCATE plan_scratch_stmt")
	}()
	stmts := []string{"CREATE SCHEMA plan_scratch"}
	for _, tb := range setup.Tables {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE plan_scratch.%[1]s (LIKE public.%[1]s INCLUDING ALL)", tb))
	}
	stmts = append(stmts, "SET LOCAL search_path = plan_scratch, public")
	if len(setup.Fill) > 0 {
		stmts = append(stmts, setup.Fill...)
		if analyzed := without(setup.Tables, setup.Unanalyzed); len(analyzed) > 0 {
			stmts = append(stmts, "ANALYZE "+strings.Join(analyzed, ", "))
		}
	}
	stmts = append(stmts, "SET LOCAL plan_cache_mode = force_generic_plan")
	if !setup.SeqScan {
		stmts = append(stmts, "SET LOCAL enable_seqscan = off")
	}
	stmts = append(stmts, "PREPARE plan_scratch_stmt AS "+sql)
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("stack: generic plan: %s: %v", s, err)
		}
	}
	rows, err := tx.Query(ctx, "EXPLAIN EXECUTE plan_scratch_stmt("+strings.Join(literals, ", ")+")")
	if err != nil {
		t.Fatalf("stack: generic plan: explain: %v", err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatalf("stack: generic plan: %v", err)
		}
		b.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("stack: generic plan: explain: %v", err)
	}
	return b.String()
}
