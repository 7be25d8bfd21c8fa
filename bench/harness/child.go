package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sendstream/bench/baseline"
)

// The bench binary re-executes itself with one of these flags to run a
// baseline in its own process.
const (
	FlagServeBaseline = "internal-serve-baseline"
	FlagWorkBaseline  = "internal-work-baseline"
)

// StartBaselineServer starts the HTTP baseline name in a child process
// (this binary, self, re-executed with GOMAXPROCS=procs) on a free loopback
// port and returns the process and its base URL.
func StartBaselineServer(ctx context.Context, self, name, dir string, procs int) (*Process, string, error) {
	pr, pw := io.Pipe()
	p, err := StartProcess("baseline "+name, dir, cleanEnv("GOMAXPROCS="+strconv.Itoa(procs)),
		filepath.Join(dir, "baseline-"+name+".log"), pw, self, "-"+FlagServeBaseline, name)
	if err != nil {
		return nil, "", err
	}
	go func() { <-p.done; pw.Close() }()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	addr, err := ReadFirstLine(rctx, pr)
	if err != nil {
		p.Stop(time.Second)
		return nil, "", fmt.Errorf("baseline %s did not report its address: %w; log:\n%s", name, err, p.Tail(20))
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return p, "http://" + addr, nil
}

// RunWorkBaseline runs the work baseline name in a child process and returns
// what it measured.
func RunWorkBaseline(ctx context.Context, self, name, dir string, env baseline.Env, procs int, warmup, duration time.Duration) (*baseline.WorkResult, error) {
	var out bytes.Buffer
	p, err := StartProcess("baseline "+name, dir, cleanEnv(
		"GOMAXPROCS="+strconv.Itoa(procs),
		"SENDSTREAM_POSTGRES_URL="+env.PostgresURL,
		"SENDSTREAM_CLICKHOUSE_ADDR="+env.ClickHouseAddr,
		"SENDSTREAM_CLICKHOUSE_DB="+env.ClickHouseDB,
		"SENDSTREAM_KAFKA_BROKERS="+env.Brokers,
	), filepath.Join(dir, "baseline-"+name+".log"), &out, self,
		"-"+FlagWorkBaseline, name, "-warmup", warmup.String(), "-duration", duration.String())
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, warmup+duration+3*time.Minute)
	defer cancel()
	if err := p.Wait(wctx); err != nil {
		p.Stop(time.Second)
		return nil, fmt.Errorf("baseline %s: %w; log:\n%s", name, err, p.Tail(20))
	}
	var res baseline.WorkResult
	if err := json.Unmarshal(lastLine(out.Bytes()), &res); err != nil {
		return nil, fmt.Errorf("baseline %s: decode result %q: %w", name, truncate(out.String(), 300), err)
	}
	return &res, nil
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// ChildMain runs the child side of a baseline process when args carry one
// of the internal flags, and reports whether it did (the caller then exits
// with the returned code).
func ChildMain(args []string) (handled bool, code int) {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-internal-") {
		return false, 0
	}
	fs := flag.NewFlagSet("baseline child", flag.ContinueOnError)
	serve := fs.String(FlagServeBaseline, "", "")
	work := fs.String(FlagWorkBaseline, "", "")
	warmup := fs.Duration("warmup", 2*time.Second, "")
	duration := fs.Duration("duration", 10*time.Second, "")
	if err := fs.Parse(args); err != nil {
		return true, 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *serve != "":
		err = serveBaseline(ctx, *serve)
	case *work != "":
		err = workBaseline(ctx, *work, *warmup, *duration)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return true, 1
	}
	return true, 0
}

// serveBaseline serves an HTTP baseline on a free port, prints the address
// on stdout, and serves until signalled.
func serveBaseline(ctx context.Context, name string) error {
	b, err := baseline.Get(name)
	if err != nil {
		return err
	}
	if !b.IsHTTP() {
		return fmt.Errorf("baseline %s is not an HTTP baseline", name)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := b.Server()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Println(ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("serve baseline %s: %w", name, err)
	case <-ctx.Done():
		return srv.Shutdown()
	}
}

// workBaseline runs a work baseline and prints its result as one JSON line.
func workBaseline(ctx context.Context, name string, warmup, duration time.Duration) error {
	b, err := baseline.Get(name)
	if err != nil {
		return err
	}
	env := baseline.Env{
		PostgresURL:    os.Getenv("SENDSTREAM_POSTGRES_URL"),
		ClickHouseAddr: os.Getenv("SENDSTREAM_CLICKHOUSE_ADDR"),
		ClickHouseDB:   os.Getenv("SENDSTREAM_CLICKHOUSE_DB"),
		Brokers:        os.Getenv("SENDSTREAM_KAFKA_BROKERS"),
	}
	env.Dir, err = os.MkdirTemp("", "sendstream-baseline-")
	if err != nil {
		return fmt.Errorf("scratch dir: %w", err)
	}
	defer os.RemoveAll(env.Dir)
	res, err := baseline.RunWork(ctx, b, env, warmup, duration)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
