package requestlog

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"sendstream/deploy/admincli"
	chsink "sendstream/sinks/clickhouse"
)

// AdminCommands is the request log's operator command: `requests` reads a
// workspace's logged calls back from ClickHouse, newest first, deduplicated
// as QueryRequests says. features.go lists it.
func AdminCommands() []admincli.Command {
	return []admincli.Command{
		{Name: "requests", Usage: "--workspace W [--since RFC3339] [--limit N]", Run: adminRequests},
	}
}

// adminRequests prints the workspace's request-log rows → {"requests":[…]}.
func adminRequests(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	since := fs.String("since", "", "RFC 3339; default 24 hours ago")
	limit := fs.Int("limit", 50, "at most this many, newest first (1 to 1000)")
	if err := admincli.ParseFlags(fs, args, "workspace"); err != nil {
		return nil, err
	}
	from := time.Now().Add(-24 * time.Hour)
	if *since != "" {
		t, err := time.Parse(time.RFC3339, *since)
		if err != nil {
			return nil, fmt.Errorf("--since %q: want RFC 3339", *since)
		}
		from = t
	}
	if *limit < 1 || *limit > 1000 {
		return nil, errors.New("--limit must be from 1 to 1000")
	}
	ch, err := env.CH(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := chsink.QueryRequests(ctx, ch, *ws, from, *limit)
	if err != nil {
		return nil, err
	}
	return map[string]any{"requests": rows}, nil
}
