package pipeline_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/pipeline"
	"sendstream/schemas"
)

// crashChildEnv carries the child's settings; TestKeyedCrashChild runs
// only when it is set.
const crashChildEnv = "SENDSTREAM_KEYED_CRASH_CHILD"

type crashChildConfig struct {
	Brokers  []string `json:"brokers"`
	Prefix   string   `json:"prefix"`
	Postgres string   `json:"postgres"`
	Table    string   `json:"table"`
}

// effectStage writes one effect row per envelope id, idempotently: the row
// is inserted only when none with that id exists. The check and the insert
// are not atomic, so the write is exactly-once only because Handle runs in
// order for one key (an id always has one key) and never twice at once.
// Every call is also counted in <table>_attempts.
type effectStage struct {
	pool  *pgxpool.Pool
	table string
}

func (s *effectStage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	time.Sleep(5 * time.Millisecond) // the outside world's latency
	i, err := strconv.Atoi(env.ID[strings.LastIndexByte(env.ID, '-')+1:])
	if err != nil {
		return nil, pipeline.Permanent(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.table+`_attempts (id, n) VALUES ($1, 1)
		ON CONFLICT (id) DO UPDATE SET n = `+s.table+`_attempts.n + 1`, env.ID); err != nil {
		return nil, fmt.Errorf("count attempt %s: %w", env.ID, err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.table+` (id, key, i)
		SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM `+s.table+` WHERE id = $1)`, env.ID, env.Key, i); err != nil {
		return nil, fmt.Errorf("effect %s: %w", env.ID, err)
	}
	return nil, nil
}

// TestKeyedCrashChild is the runner process of
// TestKeyedKillMidRunHandlesEachOnce: it runs a keyed stage until SIGTERM
// (or until it is killed).
func TestKeyedCrashChild(t *testing.T) {
	raw := os.Getenv(crashChildEnv)
	if raw == "" {
		t.Skip("helper process of TestKeyedKillMidRunHandlesEachOnce")
	}
	var cfg crashChildConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, cfg.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := &effectStage{pool: pool, table: cfg.Table}
	reg := pipeline.Registered{
		Name: "crash", Consumes: "in", Concurrency: 8,
		Build: func(context.Context, pipeline.Resources) (pipeline.Stage, error) { return st, nil },
	}
	run := keyedRunConfig(cfg.Brokers, cfg.Prefix, &recPublisher{}, reg)
	if err := pipeline.Run(ctx, run); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestKeyedKillMidRunHandlesEachOnce runs a keyed stage in a child process,
// kills it with SIGKILL mid-run, and starts it again: every envelope is
// handled, each one's effect happens exactly once, each key's effects are
// in order, and everything is committed in the end.
func TestKeyedKillMidRunHandlesEachOnce(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("in the child")
	}
	const keys, perKey = 300, 10
	const n = keys * perKey
	env := stack.ForTest(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, env.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	table := "keyed_crash_" + hex.EncodeToString(rb[:])
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (seq bigserial PRIMARY KEY, id text NOT NULL, key text NOT NULL, i int NOT NULL);
		CREATE INDEX ON `+table+` (id);
		CREATE TABLE `+table+`_attempts (id text PRIMARY KEY, n int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE `+table+`, `+table+`_attempts`) })

	prefix := "crash."
	brokers := keyedCluster(t, prefix, "in", schemas.TopicDeadLetter)
	cl := kgoClient(t, brokers)
	envs := make([]schemas.Envelope, 0, n)
	for i := range perKey {
		for k := range keys {
			envs = append(envs, keyedEnv(fmt.Sprintf("c%d", k), i))
		}
	}
	at := produceEnvs(t, cl, prefix+"in", envs)
	end := map[int32]int64{}
	for _, p := range at {
		end[p.partition] = max(end[p.partition], p.offset+1)
	}

	cfg, _ := json.Marshal(crashChildConfig{Brokers: brokers, Prefix: prefix, Postgres: env.PostgresURL, Table: table})
	start := func() (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKeyedCrashChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+string(cfg))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out
	}
	effects := func() (rows, ids int) {
		if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT id) FROM `+table).Scan(&rows, &ids); err != nil {
			t.Fatal(err)
		}
		return rows, ids
	}

	first, out1 := start()
	if !poll(60*time.Second, func() bool { _, ids := effects(); return ids >= n/3 }) {
		_ = first.Process.Kill()
		_ = first.Wait()
		t.Fatalf("the first runner did not get a third of the way in 60s; its output:\n%s", out1)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	_, idsAtKill := effects()
	if idsAtKill >= n {
		t.Fatalf("the runner had finished (%d of %d) before it was killed: not a mid-run kill", idsAtKill, n)
	}
	committedAtKill := committedOffsets(t, cl, pipeline.GroupID("crash"), prefix+"in")
	t.Logf("killed with %d of %d effects written; committed %v of %v", idsAtKill, n, committedAtKill, end)

	second, out2 := start()
	defer func() { _ = second.Process.Kill(); _ = second.Wait() }()
	done := poll(60*time.Second, func() bool {
		if _, ids := effects(); ids < n {
			return false
		}
		got := committedOffsets(t, cl, pipeline.GroupID("crash"), prefix+"in")
		for p, e := range end {
			if got[p] != e {
				return false
			}
		}
		return true
	})
	if !done {
		rows, ids := effects()
		t.Fatalf("after the restart: %d effect rows for %d of %d ids, committed %v of %v; runner output:\n%s",
			rows, ids, n, committedOffsets(t, cl, pipeline.GroupID("crash"), prefix+"in"), end, out2)
	}
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.Wait(); err != nil {
		t.Errorf("the restarted runner did not drain and exit cleanly: %v\n%s", err, out2)
	}

	// Each effect once, each key in order.
	rows, ids := effects()
	if rows != n || ids != n {
		t.Fatalf("%d effect rows for %d distinct ids; want exactly one for each of %d", rows, ids, n)
	}
	r, err := pool.Query(ctx, `SELECT key, i FROM `+table+` ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	nextOf := map[string]int{}
	for r.Next() {
		var key string
		var i int
		if err := r.Scan(&key, &i); err != nil {
			t.Fatal(err)
		}
		if i != nextOf[key] {
			t.Fatalf("key %s: effect of envelope %d came when %d was next", key, i, nextOf[key])
		}
		nextOf[key]++
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	var attempts int
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0) FROM `+table+`_attempts`).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if attempts < n {
		t.Fatalf("%d Handle calls recorded for %d envelopes", attempts, n)
	}
	t.Logf("%d envelopes, %d Handle calls (%d redelivered after the kill), one effect each", n, attempts, attempts-n)
}
