package harness

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseEnvFile(t *testing.T) {
	got := ParseEnvFile([]byte("# stack\nSENDSTREAM_POSTGRES_URL=postgres://u@127.0.0.1:5/db?sslmode=disable\n\nexport SENDSTREAM_CLICKHOUSE_ADDR=\"127.0.0.1:9\"\nnot a pair\nX='a=b'\n"))
	want := map[string]string{
		"SENDSTREAM_POSTGRES_URL":    "postgres://u@127.0.0.1:5/db?sslmode=disable",
		"SENDSTREAM_CLICKHOUSE_ADDR": "127.0.0.1:9",
		"X":                          "a=b",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestLoadStackEnvPrefersTheEnvironment(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".run", "stack.env"),
		[]byte("SENDSTREAM_POSTGRES_URL=postgres://file\nSENDSTREAM_CLICKHOUSE_ADDR=127.0.0.1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SENDSTREAM_POSTGRES_URL", "postgres://env")
	t.Setenv("SENDSTREAM_CLICKHOUSE_ADDR", "")
	t.Setenv("SENDSTREAM_CLICKHOUSE_DB", "")
	s := LoadStackEnv(root)
	if s.PostgresURL != "postgres://env" || s.ClickHouseAddr != "127.0.0.1:1" || s.ClickHouseDB != "sendstream" {
		t.Fatalf("%+v", s)
	}
	if s.Missing() != nil {
		t.Fatal(s.Missing())
	}
	t.Setenv("SENDSTREAM_POSTGRES_URL", "")
	if err := LoadStackEnv(t.TempDir()).Missing(); err == nil {
		t.Fatal("an empty stack must be reported")
	}
}

func TestFindRootAndMachine(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := FindRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "bench", "harness")); err != nil {
		t.Fatalf("root %s: %v", root, err)
	}
	if _, err := FindRoot(t.TempDir()); err == nil {
		t.Fatal("outside the module must fail")
	}
	m := ReadMachine()
	if m.NumCPU < 1 || m.MemTotalM <= 0 || m.Kernel == "" || m.GoVersion == "" {
		t.Fatalf("%+v", m)
	}
}
