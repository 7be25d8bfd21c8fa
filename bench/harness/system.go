package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// System is the system under test as the harness started it: a fresh broker
// process, `sendstream serve` on a free port, and a workspace whose API key
// the benchmark's requests carry. For a self test, Server is a second
// baseline server and the other fields are empty.
type System struct {
	Root        string // repository root
	Bin         string // bin/sendstream
	Dir         string // scratch directory of this benchmark
	Stack       StackEnv
	Addr        string // host:port the server listens on
	BaseURL     string // http://Addr
	BrokerAddr  string
	WorkspaceID string
	APIKey      string
	Server      *Process
	Broker      *Process
	ServerProcs int // GOMAXPROCS of the server
	// extraEnv is StartSystem's extraEnv: the admin CLI runs with it too
	// (e.g. SENDSTREAM_WEBHOOK_ALLOW_PRIVATE, which the webhook-endpoint
	// commands check URLs against).
	extraEnv []string
}

// Build compiles the sendstream binary to <root>/bin/sendstream.
func Build(ctx context.Context, root string) (string, error) {
	bin := filepath.Join(root, "bin", "sendstream")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build -o bin/sendstream .: %w\n%s", err, out)
	}
	return bin, nil
}

// StartBroker starts a fresh `sendstream broker` with its data under dir
// and waits until it listens.
func StartBroker(ctx context.Context, bin, dir string) (*Process, string, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, "", err
	}
	data := filepath.Join(dir, "broker")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, "", fmt.Errorf("broker data dir: %w", err)
	}
	p, err := StartProcess("broker", dir, cleanEnv(), filepath.Join(dir, "broker.log"), nil,
		bin, "broker", "--data-dir", data, "--listen", addr)
	if err != nil {
		return nil, "", err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := WaitTCP(wctx, p, addr); err != nil {
		p.Stop(time.Second)
		return nil, "", err
	}
	return p, addr, nil
}

// StartSystem starts a fresh broker and `sendstream serve` (GOMAXPROCS=procs)
// against the local stack, waits for /readyz, and creates the bench
// workspace (enterprise plan, rate multiplier 1,000,000) with the admin CLI.
// extraEnv is added to the server's environment and to the admin CLI's.
func StartSystem(ctx context.Context, root, bin, dir string, stack StackEnv, procs int, extraEnv ...string) (*System, error) {
	s := &System{Root: root, Bin: bin, Dir: dir, Stack: stack, ServerProcs: procs, extraEnv: extraEnv}
	var err error
	if s.Broker, s.BrokerAddr, err = StartBroker(ctx, bin, dir); err != nil {
		return nil, err
	}
	if s.Addr, err = FreeAddr(); err != nil {
		s.Stop()
		return nil, err
	}
	s.BaseURL = "http://" + s.Addr
	s.Server, err = StartProcess("server", root, s.env(append([]string{"GOMAXPROCS=" + strconv.Itoa(procs)}, extraEnv...)...),
		filepath.Join(dir, "server.log"), nil, bin, "serve")
	if err != nil {
		s.Stop()
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	if err := WaitHTTP200(wctx, s.Server, s.BaseURL+"/readyz"); err != nil {
		s.Stop()
		return nil, err
	}
	var ws struct {
		WorkspaceID string `json:"workspaceId"`
		APIKey      string `json:"apiKey"`
	}
	if err := s.Admin(ctx, &ws, "workspace", "create", "--name", "bench", "--plan", "enterprise", "--rate-multiplier", "1000000"); err != nil {
		s.Stop()
		return nil, err
	}
	if ws.WorkspaceID == "" || ws.APIKey == "" {
		s.Stop()
		return nil, fmt.Errorf("admin workspace create: no workspaceId/apiKey in its answer")
	}
	s.WorkspaceID, s.APIKey = ws.WorkspaceID, ws.APIKey
	return s, nil
}

// env is the environment of the server and the admin CLI.
func (s *System) env(extra ...string) []string {
	return cleanEnv(append([]string{
		"SENDSTREAM_LISTEN=" + s.Addr,
		"SENDSTREAM_SITE_URL=" + s.BaseURL,
		"SENDSTREAM_POSTGRES_URL=" + s.Stack.PostgresURL,
		"SENDSTREAM_CLICKHOUSE_ADDR=" + s.Stack.ClickHouseAddr,
		"SENDSTREAM_CLICKHOUSE_DB=" + s.Stack.ClickHouseDB,
		"SENDSTREAM_KAFKA_BROKERS=" + s.BrokerAddr,
		"SENDSTREAM_DATA_DIR=" + filepath.Join(s.Dir, "data"),
		"SENDSTREAM_LOG_LEVEL=warn",
	}, extra...)...)
}

// Admin runs `sendstream admin args…` against the same stores and with the
// same extra environment as the server and decodes its JSON answer into out (when out is non-nil).
func (s *System) Admin(ctx context.Context, out any, args ...string) error {
	cmd := exec.CommandContext(ctx, s.Bin, append([]string{"admin"}, args...)...)
	cmd.Dir = s.Root
	cmd.Env = s.env(s.extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("sendstream admin %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("sendstream admin %s: decode %q: %w", strings.Join(args, " "), truncate(stdout.String(), 200), err)
	}
	return nil
}

// PIDs returns the processes whose CPU the harness measures for the system.
func (s *System) PIDs() map[string]int {
	m := map[string]int{"generator": 0}
	if s.Server != nil {
		m["server"] = s.Server.PID()
	}
	if s.Broker != nil {
		m["broker"] = s.Broker.PID()
	}
	return m
}

// Stop stops the server, then the broker.
func (s *System) Stop() {
	s.Server.Stop(10 * time.Second)
	s.Broker.Stop(5 * time.Second)
}
