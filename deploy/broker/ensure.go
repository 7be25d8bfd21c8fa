package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Ensure returns the address of the local broker whose state lives in
// <dataDir>/kafka; `sendstream serve` calls it when no brokers are configured. A broker already running there is reused and stop does
// nothing. Otherwise this binary is started as `broker` in its own process
// group, so that the death of the caller (even by SIGKILL) does not take it
// down; stop terminates it and waits for it to persist its state.
func Ensure(ctx context.Context, dataDir string) (addr string, stop func(), err error) {
	noop := func() {}
	dir, err := filepath.Abs(filepath.Join(dataDir, "kafka"))
	if err != nil {
		return "", noop, fmt.Errorf("ensure broker: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", noop, fmt.Errorf("ensure broker: create %s: %w", dir, err)
	}

	lock, err := os.OpenFile(filepath.Join(dir, brokerEnsureLock), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", noop, fmt.Errorf("ensure broker: open lock: %w", err)
	}
	defer lock.Close()
	if err := flockCtx(ctx, lock); err != nil {
		return "", noop, fmt.Errorf("ensure broker: lock: %w", err)
	}

	if a, ok := runningBroker(ctx, dir); ok {
		return a, noop, nil
	}

	listen := "127.0.0.1:0"
	if b, err := os.ReadFile(filepath.Join(dir, brokerPortsFile)); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && portFree(p) {
			listen = "127.0.0.1:" + strconv.Itoa(p)
		}
	}
	logf, err := os.OpenFile(filepath.Join(dir, brokerLogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", noop, fmt.Errorf("ensure broker: open log: %w", err)
	}
	defer logf.Close()
	_ = os.Remove(filepath.Join(dir, brokerAddrFile))

	cmd, err := brokerCommand(dir, listen)
	if err != nil {
		return "", noop, fmt.Errorf("ensure broker: %w", err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", noop, fmt.Errorf("ensure broker: start %s: %w", cmd.Path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if a, ok := readBrokerAddr(dir); ok && dialOK(ctx, a) {
			return a, stop, nil
		}
		select {
		case err := <-exited:
			return "", noop, fmt.Errorf("ensure broker: broker exited early (%v): see %s",
				err, filepath.Join(dir, brokerLogFile))
		case <-ctx.Done():
			stop()
			return "", noop, fmt.Errorf("ensure broker: %w", ctx.Err())
		case <-deadline.C:
			stop()
			return "", noop, fmt.Errorf("ensure broker: broker did not listen within 60s: see %s",
				filepath.Join(dir, brokerLogFile))
		case <-tick.C:
		}
	}
}

// brokerCommand builds the command that runs a broker on dir: this binary,
// which must have the `broker` command (sendstream's main); tests replace it.
var brokerCommand = func(dir, listen string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	return exec.Command(exe, "broker", "--data-dir", dir, "--listen", listen), nil
}

// runningBroker reports the address of a live broker in dir, if any.
func runningBroker(ctx context.Context, dir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, brokerPIDFile))
	if err != nil {
		return "", false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil {
		return "", false
	}
	// The process lives; give a starting broker (replaying its log) time to listen.
	for i := 0; i < 300; i++ {
		if a, ok := readBrokerAddr(dir); ok && dialOK(ctx, a) {
			return a, true
		}
		if syscall.Kill(pid, 0) != nil || ctx.Err() != nil {
			return "", false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", false
}

func readBrokerAddr(dir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, brokerAddrFile))
	if err != nil {
		return "", false
	}
	a := strings.TrimSpace(string(b))
	return a, a != ""
}

func dialOK(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// flockCtx takes an exclusive flock on f, polling so that ctx can cancel.
func flockCtx(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
