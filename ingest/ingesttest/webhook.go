package ingesttest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
)

// Subscribe stores a REST hook of workspace ws to the webhook event at
// url, as POST /v1/webhooks/subscribe does, and returns its id.
func Subscribe(t testing.TB, pg *pgxpool.Pool, ws, event, url string) string {
	t.Helper()
	id := schemas.NewID()
	if _, err := pg.Exec(context.Background(), `INSERT INTO webhook_subscriptions (id, workspace_id, event, target_url) VALUES ($1, $2, $3, $4)`,
		id, ws, event, url); err != nil {
		t.Fatalf("subscribe %s to %s: %v", ws, event, err)
	}
	return id
}
