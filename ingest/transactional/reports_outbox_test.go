package transactional_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/pipeline"
	"sendstream/schemas"
)

// TestReportEventsSurviveAFailedPublish: a provider report writes its
// status and webhook envelopes into the contacts outbox with the status
// move; a published report leaves no row behind; a report whose publish
// fails after the commit answers 503 saying its events will still be
// delivered, the provider's retry finds the status moved and publishes
// nothing, and the relay publishes every envelope once, under the ids the
// request would have used.
func TestReportEventsSurviveAFailedPublish(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true}) // messages stay queued: a report still moves them
	ctx := context.Background()
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	outboxRows := func() int64 {
		var n int64
		if err := e.pg.QueryRow(ctx, "SELECT count(*) FROM contact_outbox WHERE workspace_id = $1", ws).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	sendOne := func(to string) string {
		t.Helper()
		st, ans := e.send(key, map[string]any{"to": to, "subject": "s", "htmlContent": "<p>h</p>"})
		if st != 201 {
			t.Fatal(st, ans)
		}
		return ans["id"].(string)
	}
	published := sendOne(uniq("published"))
	delivered := sendOne(uniq("delivered"))
	bounced := sendOne(uniq("bounced"))

	if st, ans := e.call("POST", "/api/providers/reports", key, map[string]any{"reports": []map[string]any{
		{"type": "delivered", "messageId": published}}}); st != 200 {
		t.Fatalf("report: %d %v", st, ans)
	}
	deadline := time.Now().Add(10 * time.Second)
	for outboxRows() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the published report's outbox rows were not deleted")
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := e.h.Publisher.Close(); err != nil { // every publish of the server fails from here on
		t.Fatal(err)
	}
	reports := map[string]any{"reports": []map[string]any{
		{"type": "delivered", "messageId": delivered},
		{"type": "bounced", "messageId": bounced, "bounceType": "hard", "reason": "550 5.1.1 unknown"},
	}}
	st, ans := e.call("POST", "/api/providers/reports", key, reports)
	msg, _ := ans["error"].(string)
	if st != 503 || !strings.Contains(msg, "stored") || !strings.Contains(msg, "will still be delivered") {
		t.Fatalf("report whose publish failed: %d %v, want a 503 saying its events will still be delivered", st, ans)
	}
	if n := outboxRows(); n != 4 {
		t.Fatalf("%d outbox rows after two committed, unpublished reports, want 4 (a status and a webhook envelope each)", n)
	}
	if s := e.pgStatus(bounced); s != schemas.MessageBounced {
		t.Fatalf("bounced message is %s", s)
	}
	// The provider's retry: the status already moved, nothing to publish,
	// so the server answers 200 without publishing.
	st, ans = e.call("POST", "/api/providers/reports", key, reports)
	if st != 200 {
		t.Fatalf("retried reports: %d %v", st, ans)
	}
	for _, r := range ans["results"].([]any) {
		if r.(map[string]any)["applied"] != false {
			t.Errorf("retried report applied again: %v", r)
		}
	}

	pub, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: e.h.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if n, err := e.contacts.RelayWorkspaceOnce(ctx, pub, ws, time.Hour, 100); err != nil || n != 0 {
		t.Fatalf("relay within the grace period: %d rows, %v", n, err)
	}
	for {
		n, err := e.contacts.RelayWorkspaceOnce(ctx, pub, ws, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if n := outboxRows(); n != 0 {
		t.Fatalf("%d outbox rows left after the relay", n)
	}

	want := map[string]string{ // envelope id -> what it is
		schemas.ChildID(published, schemas.TypeWebhookEmailDelivered, 0):                            "EMAIL_DELIVERED of the published report",
		schemas.ChildID(published, schemas.TypeTransactionalStatus+"/"+schemas.MessageDelivered, 0): "status delivered of the published report",
		schemas.ChildID(delivered, schemas.TypeWebhookEmailDelivered, 0):                            "relayed EMAIL_DELIVERED",
		schemas.ChildID(delivered, schemas.TypeTransactionalStatus+"/"+schemas.MessageDelivered, 0): "relayed status delivered",
		schemas.ChildID(bounced, schemas.TypeWebhookEmailBounced, 0):                                "relayed EMAIL_BOUNCED",
		schemas.ChildID(bounced, schemas.TypeTransactionalStatus+"/"+schemas.MessageBounced, 0):     "relayed status bounced",
	}
	seen := map[string]int{}
	for _, topic := range []string{schemas.TopicWebhooks, schemas.TopicMessageStatus} {
		for _, env := range e.h.Consume(t, topic) {
			if env.Workspace != ws {
				continue
			}
			seen[env.ID]++
			if _, ok := want[env.ID]; !ok {
				t.Errorf("unexpected %s %s on %s: %s", env.Type, env.ID, topic, env.Payload)
			}
			if env.CausationID == "" || env.Key != ws+":"+env.CausationID {
				t.Errorf("%s %s: causation %q, key %q", env.Type, env.ID, env.CausationID, env.Key)
			}
			if env.ID == schemas.ChildID(bounced, schemas.TypeWebhookEmailBounced, 0) {
				var d schemas.EmailBouncedData
				if err := json.Unmarshal(env.Payload, &d); err != nil || d.MessageID != bounced || d.Type != "hard" || d.Reason != "550 5.1.1 unknown" {
					t.Errorf("relayed EMAIL_BOUNCED payload: %s (%v)", env.Payload, err)
				}
			}
		}
	}
	for id, what := range want {
		if seen[id] != 1 {
			t.Errorf("%s (%s) published %d times, want exactly once", what, id, seen[id])
		}
	}
}

// TestRelayedContactEventOfASendNamesItsRequest: the contact upsert of a
// send writes its event into the contacts outbox with the send's request
// id, so when the send's publish fails the relay publishes the
// contact.created the request would have published, causationId included.
func TestRelayedContactEventOfASendNamesItsRequest(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	ctx := context.Background()
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	if err := e.h.Publisher.Close(); err != nil { // every publish of the server fails from here on
		t.Fatal(err)
	}
	to := uniq("contact")
	st, ans := e.send(key, map[string]any{"to": to, "subject": "s", "htmlContent": "<p>h</p>", "contact": map[string]any{"firstName": "Ann"}})
	if st != 503 {
		t.Fatalf("send whose publish failed: %d %v", st, ans)
	}
	var contactID string
	if err := e.pg.QueryRow(ctx, "SELECT id FROM contacts WHERE workspace_id = $1 AND email = $2", ws, to).Scan(&contactID); err != nil {
		t.Fatalf("the send's contact was not stored: %v", err)
	}
	pub, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: e.h.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if _, err := e.contacts.RelayWorkspaceOnce(ctx, pub, ws, 0, 1000); err != nil {
		t.Fatal(err)
	}
	var got []schemas.Envelope
	for _, env := range e.envelopes(schemas.TopicContacts, schemas.TypeContactCreated, ws) {
		if env.Key == ws+":"+contactID {
			got = append(got, env)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d contact.created of the send's contact on the topic, want 1", len(got))
	}
	if got[0].CausationID == "" {
		t.Errorf("relayed contact.created of a send carries no causationId (the send's request id)")
	}
	var rid string
	if err := e.pg.QueryRow(ctx, "SELECT count(*)::text FROM contact_outbox WHERE workspace_id = $1", ws).Scan(&rid); err != nil || rid != "0" {
		t.Errorf("outbox rows left after the relay: %s (%v)", rid, err)
	}
}
