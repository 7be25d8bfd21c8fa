package ingesttest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
	"sendstream/sinks/webhook"
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

// Endpoint stores an enabled dashboard endpoint of workspace ws listing
// events and returns its id. Its secret is a placeholder that does not
// decrypt: it makes ws want those events, for tests of what a producer
// publishes, not a target anything can be delivered to.
func Endpoint(t testing.TB, pg *pgxpool.Pool, ws string, events ...string) string {
	t.Helper()
	id := schemas.NewID()
	if _, err := pg.Exec(context.Background(), `INSERT INTO webhook_endpoints (id, workspace_id, url, events, enabled, secret_enc, created_at, updated_at)
		VALUES ($1, $2, 'https://hooks.example.com/ep', $3, true, '\x00', now(), now())`, id, ws, events); err != nil {
		t.Fatalf("endpoint of %s for %v: %v", ws, events, err)
	}
	return id
}

// Types lists the types of envs in order.
func Types(envs []schemas.Envelope) []string {
	var ts []string
	for _, e := range envs {
		ts = append(ts, e.Type)
	}
	return ts
}

// AwaitOutputs calls outputs until it answers want, for a producer that
// caches its workspace's webhook targets for webhook.TargetTTL: it fails
// t when an answer is neither want nor before (the answer of the targets
// as they were), or when want has not come within the cache time.
func AwaitOutputs(t testing.TB, what string, outputs func() []string, before, want []string) {
	t.Helper()
	deadline := time.Now().Add(webhook.TargetTTL + 5*time.Second)
	for {
		got := outputs()
		if slices.Equal(got, want) {
			return
		}
		if !slices.Equal(got, before) || time.Now().After(deadline) {
			t.Fatalf("%s: outputs %v, want %v within the cache time", what, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
