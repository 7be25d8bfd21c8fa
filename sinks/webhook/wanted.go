package webhook

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed sql/wanted.sql
var sqlWanted string

// Wanted returns which of the webhook event names events some target of
// workspace ws wants (a REST hook subscription or an enabled endpoint),
// for a producer that would otherwise publish envelopes the fan-out then
// drops for want of a target.
func Wanted(ctx context.Context, pg *pgxpool.Pool, ws string, events []string) (map[string]bool, error) {
	rows, err := pg.Query(ctx, sqlWanted, ws, events)
	if err != nil {
		return nil, fmt.Errorf("webhook targets of %s: %w", ws, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("webhook targets of %s: %w", ws, err)
	}
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}
