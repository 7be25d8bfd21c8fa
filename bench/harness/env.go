package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// StackEnv is where the local stack (started by deploy/stack.sh or `make
// bench`) listens.
type StackEnv struct {
	PostgresURL    string `json:"-"` // may hold a password: not written to results
	ClickHouseAddr string `json:"clickhouseAddr"`
	ClickHouseDB   string `json:"clickhouseDb"`
	Brokers        string `json:"-"` // the stack's own broker; benchmarks start fresh ones
}

// LoadStackEnv reads the stack's addresses: each SENDSTREAM_* variable from
// the environment when set, else from <root>/.run/stack.env.
func LoadStackEnv(root string) StackEnv {
	file := map[string]string{}
	if b, err := os.ReadFile(filepath.Join(root, ".run", "stack.env")); err == nil {
		file = ParseEnvFile(b)
	}
	get := func(k string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return file[k]
	}
	s := StackEnv{
		PostgresURL:    get("SENDSTREAM_POSTGRES_URL"),
		ClickHouseAddr: get("SENDSTREAM_CLICKHOUSE_ADDR"),
		ClickHouseDB:   get("SENDSTREAM_CLICKHOUSE_DB"),
		Brokers:        get("SENDSTREAM_KAFKA_BROKERS"),
	}
	if s.ClickHouseDB == "" {
		s.ClickHouseDB = "sendstream"
	}
	return s
}

// Missing returns an error naming what the system under test needs and the
// stack does not provide.
func (s StackEnv) Missing() error {
	var miss []string
	if s.PostgresURL == "" {
		miss = append(miss, "SENDSTREAM_POSTGRES_URL")
	}
	if s.ClickHouseAddr == "" {
		miss = append(miss, "SENDSTREAM_CLICKHOUSE_ADDR")
	}
	if len(miss) > 0 {
		return fmt.Errorf("local stack not found (%s unset and not in .run/stack.env): run `make bench`, or start it with deploy/stack.sh",
			strings.Join(miss, ", "))
	}
	return nil
}

// ParseEnvFile parses KEY=VALUE lines; blank lines and # comments are
// skipped, an optional "export " prefix and matching quotes are removed.
func ParseEnvFile(b []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[strings.TrimSpace(k)] = v
	}
	return out
}

// FindRoot walks up from dir to the directory holding the sendstream go.mod.
func FindRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module sendstream")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("not inside the sendstream module (no go.mod with `module sendstream` above the current directory)")
		}
	}
}

// Machine describes where a result was measured.
type Machine struct {
	NumCPU    int    `json:"nproc"`
	MemTotalM int64  `json:"memTotalMB"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"goVersion"`
	CPUModel  string `json:"cpuModel"`
	LoadAvg   string `json:"loadAvgAtStart"`
}

// ReadMachine gathers the machine facts from /proc and the runtime.
func ReadMachine() Machine {
	m := Machine{NumCPU: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemTotalM = meminfoMB(b, "MemTotal:")
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = cpuModel(b)
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return m
}

func meminfoMB(b []byte, key string) int64 {
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb / 1024
			}
		}
	}
	return 0
}

func cpuModel(b []byte) string {
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
