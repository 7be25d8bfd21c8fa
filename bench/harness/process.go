package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// Process is a child process the harness started (a baseline server, the
// broker, the server under test). Its output goes to a log file.
type Process struct {
	Name string
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess starts bin with args in dir, with env as its whole
// environment, stdout and stderr appended to logPath. When stdout is
// non-nil the child's stdout goes there instead (and stderr to the log).
func StartProcess(name, dir string, env []string, logPath string, stdout io.Writer, bin string, args ...string) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	if stdout != nil {
		cmd.Stdout = stdout
	}
	// Own process group, so a Ctrl-C to the harness reaches the children
	// only through Stop (and their own children with them); SIGTERM if the
	// harness dies without stopping them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the child has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the child's process group, waits up to grace, then
// sends SIGKILL. It is safe to call more than once.
func (p *Process) Stop(grace time.Duration) {
	if p == nil || p.Exited() {
		return
	}
	_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
	<-p.done
}

// Wait waits for the child to end and returns its exit error.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Tail returns the last n lines of the child's log.
func (p *Process) Tail(n int) string { return tailFile(p.Log, n) }

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FreeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// WaitTCP waits until addr accepts connections, the process ends, or ctx
// ends.
func WaitTCP(ctx context.Context, p *Process, addr string) error {
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if err := waitStep(ctx, p); err != nil {
			return fmt.Errorf("%s never listened on %s: %w", p.Name, addr, err)
		}
	}
}

// WaitHTTP200 waits until GET url answers 200.
func WaitHTTP200(ctx context.Context, p *Process, url string) error {
	last := ""
	for {
		code, body, err := fasthttp.GetTimeout(nil, url, time.Second)
		if err == nil && code == 200 {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("HTTP %d %s", code, truncate(string(body), 200))
		}
		if err := waitStep(ctx, p); err != nil {
			return fmt.Errorf("%s not ready at %s (last answer: %s): %w", p.Name, url, last, err)
		}
	}
}

func waitStep(ctx context.Context, p *Process) error {
	if p != nil && p.Exited() {
		return fmt.Errorf("process exited (%v); log tail:\n%s", p.err, p.Tail(30))
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(100 * time.Millisecond):
		return nil
	}
}

// ReadFirstLine reads one line from r (e.g. the address a baseline server
// prints), giving up when ctx ends.
func ReadFirstLine(ctx context.Context, r io.Reader) (string, error) {
	ch := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		if err != nil {
			errc <- err
			return
		}
		ch <- strings.TrimSpace(line)
	}()
	select {
	case l := <-ch:
		return l, nil
	case err := <-errc:
		return "", fmt.Errorf("read first line: %w", err)
	case <-ctx.Done():
		return "", errors.New("read first line: " + ctx.Err().Error())
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// passThrough maps variables of the bench's own environment to the
// settings they become in every process it starts (the SENDSTREAM_ ones of
// its environment are dropped): pprof listeners of the server and the broker,
// the server's metrics listener, and knobs for experiments.
var passThrough = [][2]string{
	{"BENCH_SERVER_DEBUG_ADDR", "SENDSTREAM_DEBUG_ADDR"},
	{"BENCH_BROKER_DEBUG_ADDR", "SENDSTREAM_BROKER_DEBUG_ADDR"},
	{"BENCH_SERVER_METRICS_LISTEN", "SENDSTREAM_METRICS_LISTEN"},
	{"BENCH_SERVER_GC_PERCENT", "SENDSTREAM_GC_PERCENT"},
	{"BENCH_SERVER_MEMORY_LIMIT_MB", "SENDSTREAM_MEMORY_LIMIT_MB"},
	{"BENCH_BROKER_FSYNC", "SENDSTREAM_BROKER_FSYNC"},
	{"BENCH_BROKER_PROCS", "SENDSTREAM_BROKER_PROCS"},
	{"BENCH_BROKER_GC_PERCENT", "SENDSTREAM_BROKER_GC_PERCENT"},
}

// cleanEnv returns the environment without SENDSTREAM_* and GOMAXPROCS,
// plus the passThrough settings and extra.
func cleanEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SENDSTREAM_") || strings.HasPrefix(kv, "GOMAXPROCS=") {
			continue
		}
		out = append(out, kv)
	}
	for _, v := range passThrough {
		if val := os.Getenv(v[0]); val != "" {
			out = append(out, v[1]+"="+val)
		}
	}
	return append(out, extra...)
}
