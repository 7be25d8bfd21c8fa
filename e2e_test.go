package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/sinks/clickhouse"
)

// These tests run the real binary as separate OS processes against the
// local stack (Postgres, ClickHouse) and a broker process of their own.

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary builds bin/sendstream into a temporary directory once per test run.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sendstream-e2e")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "sendstream")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// e2eEnv is the environment shared by the processes of one test.
type e2eEnv struct {
	st        stack.Env
	prefix    string
	broker    string
	brokerDir string
	brokerCmd *exec.Cmd
	vars      []string
}

func newE2E(t *testing.T) *e2eEnv {
	t.Helper()
	st := stack.ForTest(t)
	e := &e2eEnv{st: st, prefix: stack.TopicPrefix(t)}
	e.broker = freeAddr(t)
	e.brokerDir = t.TempDir()
	e.startBroker(t)
	e.vars = []string{
		"SENDSTREAM_POSTGRES_URL=" + st.PostgresURL,
		"SENDSTREAM_CLICKHOUSE_ADDR=" + st.ClickHouseAddr,
		"SENDSTREAM_CLICKHOUSE_DB=" + st.ClickHouseDB,
		"SENDSTREAM_KAFKA_BROKERS=" + e.broker,
		"SENDSTREAM_TOPIC_PREFIX=" + e.prefix,
		"SENDSTREAM_DATA_DIR=" + t.TempDir(),
		"SENDSTREAM_LOG_LEVEL=warn",
	}
	return e
}

// startBroker starts (or restarts) the test's broker on its address and
// data directory and waits until it listens.
func (e *e2eEnv) startBroker(t *testing.T) {
	t.Helper()
	e.brokerCmd = e.start(t, "broker", nil, "broker", "--data-dir", e.brokerDir, "--listen", e.broker)
	waitTCP(t, e.broker)
}

// start runs the binary with args; the process is killed when the test ends.
func (e *e2eEnv) start(t *testing.T, name string, extra []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(append(os.Environ(), e.vars...), extra...)
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("--- %s log ---\n%s", name, tail(b, 4000))
		}
	})
	return cmd
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// server starts `sendstream <role>` listening on a fresh address and waits
// until /readyz answers 200.
func (e *e2eEnv) server(t *testing.T, role string) (*exec.Cmd, string) {
	t.Helper()
	addr := freeAddr(t)
	cmd := e.start(t, role+"-"+addr, []string{"SENDSTREAM_LISTEN=" + addr, "SENDSTREAM_SITE_URL=http://" + addr}, role)
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return cmd, base
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s on %s never became ready", role, addr)
	return nil, ""
}

// admin runs `sendstream admin args...` and decodes its JSON answer.
func (e *e2eEnv) admin(t *testing.T, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"admin"}, args...)...)
	cmd.Env = append(os.Environ(), e.vars...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("admin %v: %v\n%s", args, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("admin %v: output %q is not one JSON object: %v", args, stdout.String(), err)
	}
}

func waitTCP(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never answered", addr)
}

func get(t *testing.T, url, key string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

type workspace struct {
	WorkspaceID string `json:"workspaceId"`
	APIKey      string `json:"apiKey"`
}

// The 61st call in a minute answers 429 even when the calls alternate
// between two ingest processes sharing the same stores.
func TestRateLimitAcrossTwoProcesses(t *testing.T) {
	e := newE2E(t)
	_, a := e.server(t, "ingest")
	_, b := e.server(t, "ingest")
	var ws workspace
	e.admin(t, &ws, "workspace", "create", "--name", "two-process-limit")

	// Stay inside one minute window so the counter is not reset mid-test.
	if s := time.Now().Second(); s > 40 {
		time.Sleep(time.Duration(61-s) * time.Second)
	}
	for i := 0; i < 60; i++ {
		base := a
		if i%2 == 1 {
			base = b
		}
		if code, body, _ := get(t, base+"/api/v1/me", ws.APIKey); code != 200 {
			t.Fatalf("call %d via %s: %d %s", i+1, base, code, body)
		}
	}
	for _, base := range []string{a, b} {
		code, body, hdr := get(t, base+"/api/v1/me", ws.APIKey)
		if code != 429 {
			t.Fatalf("61st call via %s: status %d %s, want 429", base, code, body)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil || len(m) != 1 || m["error"] == nil {
			t.Fatalf("429 body %s: want only {\"error\"}", body)
		}
		if hdr.Get("Retry-After") != "" {
			t.Fatalf("429 carries Retry-After %q; the spec says none", hdr.Get("Retry-After"))
		}
	}
}

// Killing the server with SIGKILL while requests are in flight loses nothing
// that got a 2xx: after a restart every such call's request-log row arrives.
// The broker is killed with SIGKILL too, right after the server: an
// acknowledged batch is in its segment files (the page cache) before the
// answer, so no fsync is needed to survive a killed process.
func TestKillNineLosesNoAcceptedRequest(t *testing.T) {
	e := newE2E(t)
	srv, base := e.server(t, "serve")
	var ws workspace
	e.admin(t, &ws, "workspace", "create", "--name", "kill-nine", "--plan", "enterprise", "--rate-multiplier", "100000")

	var (
		mu       sync.Mutex
		accepted []string
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequest("GET", base+"/api/v1/me", nil)
				req.Header.Set("Authorization", "Bearer "+ws.APIKey)
				resp, err := client.Do(req)
				if err != nil {
					continue // the server died under us: not accepted
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					mu.Lock()
					accepted = append(accepted, resp.Header.Get("X-Request-Id"))
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = srv.Process.Wait()
	if err := e.brokerCmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = e.brokerCmd.Process.Wait()
	cancel()
	wg.Wait()
	e.startBroker(t)
	if len(accepted) < 50 {
		t.Fatalf("only %d requests were accepted before the kill; the test proves nothing", len(accepted))
	}
	for _, id := range accepted {
		if id == "" {
			t.Fatal("a 2xx answer carried no X-Request-Id")
		}
	}

	// Restart: the pipeline picks up what the dead process left in Kafka.
	e.server(t, "serve")
	conn, err := clickhouse.Open(context.Background(), e.st.ClickHouseAddr, e.st.ClickHouseDB)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	want := map[string]bool{}
	for _, id := range accepted {
		want[id] = true
	}
	deadline := time.Now().Add(60 * time.Second)
	var missing []string
	for {
		rows, err := conn.Query(context.Background(),
			"SELECT id FROM request_log WHERE workspace = ? GROUP BY id", ws.WorkspaceID)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got[id] = true
		}
		rows.Close()
		missing = missing[:0]
		for id := range want {
			if !got[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			t.Logf("all %d accepted requests have their request-log row after kill -9 and restart", len(want))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d accepted requests have no request-log row after restart, e.g. %s",
				len(missing), len(want), strings.Join(missing[:min(3, len(missing))], ", "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
