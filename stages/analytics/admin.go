package analytics

import (
	"context"
	"flag"
	"fmt"
	"time"

	"sendstream/deploy/admincli"
)

// AdminCommands is the events feature's operator command: the analytics
// reports of ingest/events/README.md over the ClickHouse events table this
// stage writes. features.go lists it.
func AdminCommands() []admincli.Command {
	return []admincli.Command{{
		Name:  "analytics",
		Usage: "--workspace W --report events-per-day|revenue-per-day|unique-contacts [--from RFC3339|YYYY-MM-DD] [--to RFC3339|YYYY-MM-DD]",
		Run:   adminAnalytics,
	}}
}

// adminAnalytics prints one report → {"workspace","report","from","to","rows":[…]}.
// The range is [from, to) of the events' occurredAt; default the last 30 days.
func adminAnalytics(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	report := fs.String("report", "", "events-per-day, revenue-per-day or unique-contacts")
	fromS := fs.String("from", "", "start (inclusive); default 30 days before --to")
	toS := fs.String("to", "", "end (exclusive); default now")
	if err := admincli.ParseFlags(fs, args, "workspace", "report"); err != nil {
		return nil, err
	}
	to := time.Now().UTC()
	if *toS != "" {
		t, err := parseDay(*toS)
		if err != nil {
			return nil, fmt.Errorf("--to: %w", err)
		}
		to = t
	}
	from := to.Add(-30 * 24 * time.Hour)
	if *fromS != "" {
		t, err := parseDay(*fromS)
		if err != nil {
			return nil, fmt.Errorf("--from: %w", err)
		}
		from = t
	}
	r := Range{From: from, To: to}
	ch, err := env.CH(ctx)
	if err != nil {
		return nil, err
	}
	var rows any
	switch *report {
	case "events-per-day":
		rows, err = EventsPerDay(ctx, ch, *ws, r)
	case "revenue-per-day":
		rows, err = RevenuePerDay(ctx, ch, *ws, r)
	case "unique-contacts":
		rows, err = UniqueContacts(ctx, ch, *ws, r)
	default:
		return nil, fmt.Errorf("--report %q: want events-per-day, revenue-per-day or unique-contacts", *report)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"workspace": *ws, "report": *report, "from": from, "to": to, "rows": rows}, nil
}

// parseDay accepts an RFC 3339 time or a YYYY-MM-DD date (UTC midnight).
func parseDay(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), nil
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want RFC 3339 or YYYY-MM-DD", s)
	}
	return t, nil
}
