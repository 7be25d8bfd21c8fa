// Command sendstream is the whole service in one binary: `serve` runs every
// role in one process; `ingest` and `worker` split the HTTP edge from the
// pipeline stages for scale-out; `migrate`, `broker` and `admin` are the
// operator's tools.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"sendstream/deploy/broker"
	"sendstream/deploy/mailsink"
)

// command is one subcommand: it runs until ctx is cancelled (by SIGINT or
// SIGTERM) or its work is done.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"serve":    {"run the HTTP edge and every pipeline stage in one process", runServe},
	"ingest":   {"run the HTTP edge only", runIngest},
	"worker":   {"run pipeline stages only (--stages a,b)", runWorker},
	"migrate":  {"apply the Postgres and ClickHouse migrations, then exit", runMigrate},
	"broker":   {"run the embedded Kafka-protocol broker (kfake) on a data dir", func(_ context.Context, args []string, _, _ io.Writer) error { return broker.Run(args) }},
	"admin":    {"operator commands; output is one JSON object (see README)", runAdmin},
	"mailsink": {"run a local SMTP sink with a web inbox (development)", mailsink.Run},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal the command drains (bounded by
	// SENDSTREAM_SHUTDOWN_TIMEOUT for serve, ingest and worker); a second
	// one ends the process at once, as without a handler.
	go func() {
		<-ctx.Done()
		stop()
	}()
	if len(os.Args) < 2 || commands[os.Args[1]].run == nil {
		usage(os.Stderr)
		os.Exit(2)
	}
	if err := commands[os.Args[1]].run(ctx, os.Args[2:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "sendstream %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sendstream <command> [flags]")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
}
