package goals_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/ingest/ingesttest"
	"sendstream/pipeline"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/stages/goals"
	"sendstream/stages/webhookdelivery"
	"sendstream/stages/webhookfanout"
)

// TestGoalFiresGoalRecordedOnce (issue 25 item 3) runs the goals stage,
// the webhooks-topic fan-out and the webhook delivery stage in the real
// runner on an in-process broker and the stack's Postgres: a goal event of
// a contact reaches a REST hook subscribed to GOAL_RECORDED with the
// catalogue's data (and one subscribed to EVENT_RECORDED), a plain event
// fires EVENT_RECORDED only, and the goal event published again after it
// was delivered (a redelivery) returns GOAL_RECORDED under the same id
// without a second delivery or a second count in the ledger.
func TestGoalFiresGoalRecordedOnce(t *testing.T) {
	pg := stack.PG(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws, contact := ingesttest.WorkspaceWithContact(ctx, t, pg, "goal hooks", "gina@example.com")

	recv := pipelinetest.NewHookRecorder(t)
	for _, ev := range []string{"GOAL_RECORDED", "EVENT_RECORDED"} {
		if _, err := pg.Exec(ctx, `INSERT INTO webhook_subscriptions (id, workspace_id, event, target_url) VALUES ($1, $2, $3, $4)`,
			schemas.NewID(), ws, ev, recv.URL+"/hook"); err != nil {
			t.Fatal(err)
		}
	}

	prefix := stack.TopicPrefix(t)
	brokers := pipelinetest.Cluster(t, prefix)
	prod := pipelinetest.Producer(ctx, t, brokers, prefix)
	stop := pipelinetest.RunStages(ctx, t, brokers, prefix, pipeline.Resources{Postgres: pg, Publisher: prod,
		Settings: map[string]string{"webhook_allow_private": "127.0.0.0/8", "secret": "e2e-test-secret-0123456789abcdef"}},
		goals.Name, webhookfanout.NameWebhooks, webhookdelivery.Name)
	defer stop()

	at := time.Now().UTC().Truncate(time.Millisecond)
	goal := env(t, ws, schemas.NewID(), schemas.EventPayload{Event: "order", ContactID: contact, Email: "gina@example.com",
		GoalType: schemas.GoalPurchase, Value: "42.5", Currency: "EUR", ExternalID: "order-7", OccurredAt: at, ReceivedAt: at,
		Properties: json.RawMessage(`{"sku":"B2"}`), Source: schemas.EventSourceAPI})
	plain := env(t, ws, schemas.NewID(), schemas.EventPayload{Event: "login", ContactID: contact, OccurredAt: at, ReceivedAt: at,
		Source: schemas.EventSourceAPI})
	if err := prod.Publish(ctx, schemas.TopicEvents, goal, plain); err != nil {
		t.Fatal(err)
	}
	recv.WaitFor(ctx, t, "GOAL_RECORDED", 1)
	recv.WaitFor(ctx, t, "EVENT_RECORDED", 2)

	// The goal event again, after its GOAL_RECORDED was delivered.
	if err := prod.Publish(ctx, schemas.TopicEvents, goal); err != nil {
		t.Fatal(err)
	}
	goalID := schemas.ChildID(goal.ID, schemas.TypeWebhookGoalRecorded, 0)
	if n := pipelinetest.Copies(ctx, t, brokers, prefix+schemas.TopicWebhooks, goalID, 2); n != 2 {
		t.Fatalf("GOAL_RECORDED %s is %d times on the webhooks topic, want 2 (the first handling and the redelivery)", goalID, n)
	}
	time.Sleep(3 * time.Second) // the copy's fan-out and delivery run meanwhile

	g := recv.Bodies("GOAL_RECORDED")
	if len(g) != 1 {
		t.Fatalf("%d GOAL_RECORDED deliveries, want 1: %v", len(g), g)
	}
	data, _ := g[0]["data"].(map[string]any)
	if g[0]["id"] != goalID || g[0]["event"] != "GOAL_RECORDED" || g[0]["teamId"] != ws || data["eventId"] != goal.ID ||
		data["contactId"] != contact || data["goalType"] != "purchase" || data["value"] != 42.5 || data["currency"] != "EUR" ||
		data["externalId"] != "order-7" || data["email"] != "gina@example.com" || data["event"] != "order" {
		t.Errorf("GOAL_RECORDED body %v", g[0])
	}
	if e := recv.Bodies("EVENT_RECORDED"); len(e) != 2 {
		t.Errorf("%d EVENT_RECORDED deliveries, want 2 (the goal and the plain event, each once)", len(e))
	}
	var goalsCounted int64
	if err := pg.QueryRow(ctx, `SELECT goals FROM contact_activity WHERE contact_id = $1`, contact).Scan(&goalsCounted); err != nil || goalsCounted != 1 {
		t.Errorf("contact_activity.goals %d (%v), want 1", goalsCounted, err)
	}
}
