package webhooklog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"sendstream/schemas"
)

// attemptEnv is the webhook.attempt.v1 envelope of a, with the contract's id.
func attemptEnv(t *testing.T, ws string, a schemas.WebhookAttempt) schemas.Envelope {
	t.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return schemas.Envelope{ID: schemas.ChildID(a.MessageID+"/"+a.TargetID, schemas.TypeWebhookAttempt, a.Attempt),
		Workspace: ws, Type: schemas.TypeWebhookAttempt, Key: ws + ":" + a.TargetID, OccurredAt: a.At, Payload: b}
}

// deliveryEnv is the webhook.delivery.v1 envelope of d, with the contract's id.
func deliveryEnv(t *testing.T, ws string, d schemas.WebhookDelivery) schemas.Envelope {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the body stays byte for byte
	if err := enc.Encode(d); err != nil {
		t.Fatal(err)
	}
	b := bytes.TrimRight(buf.Bytes(), "\n")
	return schemas.Envelope{ID: schemas.ChildID(d.MessageID+"/"+d.TargetID, schemas.TypeWebhookDelivery, d.Attempt),
		Workspace: ws, Type: schemas.TypeWebhookDelivery, Key: ws + ":" + d.TargetID, OccurredAt: d.FirstAt, Payload: b, PayloadCompact: true}
}

// noClose lends a test's ClickHouse connection to an admincli.Env, whose
// Close must not close it.
type noClose struct{ driver.Conn }

func (noClose) Close() error { return nil }

// countFinal counts the merged rows (FINAL) of table in workspace ws.
func countFinal(t *testing.T, ch driver.Conn, table, ws string) uint64 {
	t.Helper()
	var n uint64
	if err := ch.QueryRow(context.Background(), "SELECT count() FROM "+table+" FINAL WHERE workspace = ?", ws).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond every 100 ms for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
