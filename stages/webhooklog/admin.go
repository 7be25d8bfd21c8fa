package webhooklog

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"sendstream/deploy/admincli"
	whlog "sendstream/sinks/webhooklog"
)

// AdminCommands are the delivery log's operator commands (features.go
// lists them): `webhook deliveries` reads a workspace's attempts back from
// ClickHouse, newest first; `webhook replay` publishes one message again to
// every target it went to, or every message of one target since a time,
// with the same webhook-id. Both read and publish through
// sinks/webhooklog, which the dashboard uses too.
func AdminCommands() []admincli.Command {
	return []admincli.Command{
		{Name: "webhook deliveries", Usage: "--workspace W [--endpoint E] [--event T] [--status ok|failed] [--limit N]", Run: adminDeliveries},
		{Name: "webhook replay", Usage: "--workspace W (--message M | --endpoint E --since RFC3339)", Run: adminReplay},
	}
}

// adminDeliveries prints the attempts selected → {"deliveries":[…]}.
func adminDeliveries(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	var f whlog.Filter
	fs.StringVar(&f.Workspace, "workspace", "", "workspace id")
	fs.StringVar(&f.TargetID, "endpoint", "", "only this endpoint (or REST hook subscription) id")
	fs.StringVar(&f.Event, "event", "", "only this event type, e.g. CONTACT_CREATED")
	fs.StringVar(&f.Status, "status", "", "ok (2xx answers) or failed (every other outcome)")
	fs.IntVar(&f.Limit, "limit", 50, "at most this many attempts, newest first")
	if err := admincli.ParseFlags(fs, args, "workspace"); err != nil {
		return nil, err
	}
	if f.Status != "" && f.Status != whlog.StatusOK && f.Status != whlog.StatusFailed {
		return nil, fmt.Errorf("--status %q: want ok or failed", f.Status)
	}
	if f.Limit < 1 {
		return nil, errors.New("--limit must be at least 1")
	}
	ch, err := env.CH(ctx)
	if err != nil {
		return nil, err
	}
	ds, err := whlog.Deliveries(ctx, ch, f)
	if err != nil {
		return nil, err
	}
	return map[string]any{"deliveries": ds}, nil
}

// adminReplay publishes the selected messages again → {"replayed":N}.
func adminReplay(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	message := fs.String("message", "", "message id (the webhook-id): replay it to every target it went to")
	target := fs.String("endpoint", "", "endpoint (or REST hook subscription) id: replay its messages since --since")
	since := fs.String("since", "", "RFC 3339: with --endpoint, messages whose first attempt was due at or after it")
	if err := admincli.ParseFlags(fs, args, "workspace"); err != nil {
		return nil, err
	}
	if (*message != "") == (*target != "") || (*target != "") != (*since != "") {
		return nil, errors.New("give --message, or --endpoint with --since")
	}
	var from time.Time
	if *since != "" {
		t, err := time.Parse(time.RFC3339, *since)
		if err != nil {
			return nil, fmt.Errorf("--since %q: want RFC 3339", *since)
		}
		from = t
	}
	ch, err := env.CH(ctx)
	if err != nil {
		return nil, err
	}
	var logged []whlog.Logged
	if *message != "" {
		logged, err = whlog.MessageTargets(ctx, ch, *ws, *message)
	} else {
		logged, err = whlog.TargetMessages(ctx, ch, *ws, *target, from)
	}
	if err != nil {
		return nil, err
	}
	n := 0
	if len(logged) > 0 {
		p, err := env.Publisher(ctx)
		if err != nil {
			return nil, err
		}
		pub, ok := p.(whlog.Publisher)
		if !ok {
			return nil, fmt.Errorf("admin: the publisher %T cannot publish envelopes", p)
		}
		if n, err = whlog.Replay(ctx, pub, logged, time.Now()); err != nil {
			return nil, err
		}
	}
	return map[string]any{"replayed": n}, nil
}
