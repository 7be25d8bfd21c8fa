package stack

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestLoadPrefersEnvironmentOverStackEnv(t *testing.T) {
	dir := t.TempDir()
	body := "# written by deploy/stack.sh\n" +
		"SENDSTREAM_POSTGRES_URL=postgres://postgres@127.0.0.1:5555/sendstream?sslmode=disable\n" +
		"SENDSTREAM_CLICKHOUSE_ADDR=127.0.0.1:9999\n" +
		"SENDSTREAM_CLICKHOUSE_DB=sendstream\n" +
		"SENDSTREAM_KAFKA_BROKERS=127.0.0.1:7777\n"
	if err := os.WriteFile(filepath.Join(dir, "stack.env"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SENDSTREAM_DATA_DIR", dir)
	t.Setenv("SENDSTREAM_POSTGRES_URL", "")
	t.Setenv("SENDSTREAM_CLICKHOUSE_ADDR", "127.0.0.1:1234")
	t.Setenv("SENDSTREAM_CLICKHOUSE_DB", "")
	t.Setenv("SENDSTREAM_KAFKA_BROKERS", "")

	e, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	want := Env{
		PostgresURL:    "postgres://postgres@127.0.0.1:5555/sendstream?sslmode=disable",
		ClickHouseAddr: "127.0.0.1:1234", // the environment wins
		ClickHouseDB:   "sendstream",
		KafkaBrokers:   "127.0.0.1:7777",
		DataDir:        dir,
		RepoRoot:       e.RepoRoot,
	}
	if e != want {
		t.Fatalf("Load() = %+v\nwant     %+v", e, want)
	}
	if _, err := os.Stat(filepath.Join(e.RepoRoot, "deploy", "stack.sh")); err != nil {
		t.Errorf("RepoRoot %q does not hold deploy/stack.sh: %v", e.RepoRoot, err)
	}
	if got := e.Brokers(); len(got) != 1 || got[0] != "127.0.0.1:7777" {
		t.Errorf("Brokers() = %q", got)
	}
}

func TestLoadWithoutStackFails(t *testing.T) {
	t.Setenv("SENDSTREAM_DATA_DIR", t.TempDir())
	t.Setenv("SENDSTREAM_POSTGRES_URL", "")
	t.Setenv("SENDSTREAM_CLICKHOUSE_ADDR", "")
	e, err := Load()
	if err == nil {
		t.Fatalf("Load() with no stack = %+v, want an error", e)
	}
}

func TestLoadRelativeDataDirIsUnderRepoRoot(t *testing.T) {
	t.Setenv("SENDSTREAM_DATA_DIR", ".run-relative-test")
	e, _ := Load()
	if e.RepoRoot == "" || e.DataDir != filepath.Join(e.RepoRoot, ".run-relative-test") {
		t.Fatalf("DataDir = %q, RepoRoot = %q", e.DataDir, e.RepoRoot)
	}
}

// TestForTestGivesAnsweringStack runs against the real local stack.
func TestForTestGivesAnsweringStack(t *testing.T) {
	e := ForTest(t)
	if e.KafkaBrokers == "" {
		t.Fatal("ForTest returned no Kafka broker")
	}
	if err := e.Answering(context.Background()); err != nil {
		t.Fatal(err)
	}
	pool := PG(t)
	var one int
	if err := pool.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("PG: %v", err)
	}
	if err := CH(t).Ping(context.Background()); err != nil {
		t.Fatalf("CH: %v", err)
	}
	a, b := TopicPrefix(t), TopicPrefix(t)
	if a == b || !regexp.MustCompile(`^t[0-9a-f]{12}\.$`).MatchString(a) {
		t.Fatalf("TopicPrefix: %q, %q", a, b)
	}
}
