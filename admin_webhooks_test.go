package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/sinks/webhook"
)

// TestAdminWebhookEndpointWiring: `sendstream admin webhook-endpoint …`
// reaches the commands of ingest/webhooks with the server's secret, so the
// store the server opens with the same settings reads the secret back.
// ingest/webhooks tests every command's cases.
func TestAdminWebhookEndpointWiring(t *testing.T) {
	pg := stack.PG(t)
	ws, _ := mustAdmin(t, "workspace", "create", "--name", "Webhook endpoints")["workspaceId"].(string)
	m := mustAdmin(t, "webhook-endpoint", "create", "--workspace", ws, "--url", "https://93.184.216.34/in", "--events", "CONTACT_CREATED")
	id, _ := m["id"].(string)
	secret, _ := m["secret"].(string)
	set, err := adminWebhookSettings()
	if err != nil {
		t.Fatal(err)
	}
	store, err := webhook.NewEndpointStore(pg, webhook.EndpointStoreConfig{Secret: set.Secret})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := store.Secrets(context.Background(), ws, id, time.Now()); err != nil || len(got) != 1 || got[0] != secret {
		t.Fatalf("secrets of the created endpoint: %q %v", got, err)
	}
	if _, err := admin(t, "webhook-endpoint", "create", "--workspace", ws, "--url", "http://93.184.216.34/in", "--events", "CONTACT_CREATED"); err == nil || !strings.Contains(err.Error(), "https") {
		t.Fatalf("http:// accepted: %v", err)
	}
	if m := mustAdmin(t, "webhook-endpoint", "list", "--workspace", ws); len(m["endpoints"].([]any)) != 1 {
		t.Fatalf("list: %v", m)
	}
}
