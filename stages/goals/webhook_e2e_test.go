package goals_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
	"sendstream/ingest/contacts"
	"sendstream/pipeline"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/webhook/webhooktest"
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
	ws, _, err := auth.NewStore(pg).CreateWorkspace(ctx, auth.NewWorkspace{Name: "goal hooks", Plan: "pro"})
	if err != nil {
		t.Fatal(err)
	}
	cs := contacts.NewStore(pg)
	defer cs.Close()
	up, err := cs.Upsert(ctx, ws, contacts.UpsertInput{Email: "gina@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	contact := up.Contact.ID

	var mu sync.Mutex
	got := map[string][]map[string]any{} // event name → bodies
	arrived := make(chan struct{}, 64)
	recv := webhooktest.NewReceiver(t, false, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var b map[string]any
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Errorf("body %s: %v", raw, err)
		}
		mu.Lock()
		got[r.Header.Get("X-Webhook-Event")] = append(got[r.Header.Get("X-Webhook-Event")], b)
		mu.Unlock()
		arrived <- struct{}{}
		w.WriteHeader(204)
	})
	bodies := func(event string) []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]any(nil), got[event]...)
	}
	waitFor := func(event string, n int) {
		t.Helper()
		for len(bodies(event)) < n {
			select {
			case <-arrived:
			case <-ctx.Done():
				t.Fatalf("%d %s deliveries, want %d", len(bodies(event)), event, n)
			}
		}
	}
	for _, ev := range []string{"GOAL_RECORDED", "EVENT_RECORDED"} {
		if _, err := pg.Exec(ctx, `INSERT INTO webhook_subscriptions (id, workspace_id, event, target_url) VALUES ($1, $2, $3, $4)`,
			schemas.NewID(), ws, ev, recv.URL+"/hook"); err != nil {
			t.Fatal(err)
		}
	}

	prefix := stack.TopicPrefix(t)
	brokers := pipelinetest.Cluster(t, prefix)
	prod, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: brokers, TopicPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	stages, err := pipeline.SelectStages(goals.Name, webhookfanout.NameWebhooks, webhookdelivery.Name)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() {
		runErr <- pipeline.Run(runCtx, pipeline.RunConfig{Brokers: brokers, TopicPrefix: prefix, Stages: stages,
			FlushInterval: 100 * time.Millisecond, MaxWait: 50 * time.Millisecond,
			Resources: pipeline.Resources{Postgres: pg, Publisher: prod,
				Settings: map[string]string{"webhook_allow_private": "127.0.0.0/8", "secret": "e2e-test-secret-0123456789abcdef"}}})
	}()
	defer func() {
		stopRun()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	at := time.Now().UTC().Truncate(time.Millisecond)
	goal := env(t, ws, schemas.NewID(), schemas.EventPayload{Event: "order", ContactID: contact, Email: "gina@example.com",
		GoalType: schemas.GoalPurchase, Value: "42.5", Currency: "EUR", ExternalID: "order-7", OccurredAt: at, ReceivedAt: at,
		Properties: json.RawMessage(`{"sku":"B2"}`), Source: schemas.EventSourceAPI})
	plain := env(t, ws, schemas.NewID(), schemas.EventPayload{Event: "login", ContactID: contact, OccurredAt: at, ReceivedAt: at,
		Source: schemas.EventSourceAPI})
	if err := prod.Publish(ctx, schemas.TopicEvents, goal, plain); err != nil {
		t.Fatal(err)
	}
	waitFor("GOAL_RECORDED", 1)
	waitFor("EVENT_RECORDED", 2)

	// The goal event again, after its GOAL_RECORDED was delivered.
	if err := prod.Publish(ctx, schemas.TopicEvents, goal); err != nil {
		t.Fatal(err)
	}
	goalID := schemas.ChildID(goal.ID, schemas.TypeWebhookGoalRecorded, 0)
	if n := copiesOn(ctx, t, brokers, prefix+schemas.TopicWebhooks, goalID, 2); n != 2 {
		t.Fatalf("GOAL_RECORDED %s is %d times on the webhooks topic, want 2 (the first handling and the redelivery)", goalID, n)
	}
	time.Sleep(3 * time.Second) // the copy's fan-out and delivery run meanwhile

	g := bodies("GOAL_RECORDED")
	if len(g) != 1 {
		t.Fatalf("%d GOAL_RECORDED deliveries, want 1: %v", len(g), g)
	}
	data, _ := g[0]["data"].(map[string]any)
	if g[0]["id"] != goalID || g[0]["event"] != "GOAL_RECORDED" || g[0]["teamId"] != ws || data["eventId"] != goal.ID ||
		data["contactId"] != contact || data["goalType"] != "purchase" || data["value"] != 42.5 || data["currency"] != "EUR" ||
		data["externalId"] != "order-7" || data["email"] != "gina@example.com" || data["event"] != "order" {
		t.Errorf("GOAL_RECORDED body %v", g[0])
	}
	if e := bodies("EVENT_RECORDED"); len(e) != 2 {
		t.Errorf("%d EVENT_RECORDED deliveries, want 2 (the goal and the plain event, each once)", len(e))
	}
	var goalsCounted int64
	if err := pg.QueryRow(ctx, `SELECT goals FROM contact_activity WHERE contact_id = $1`, contact).Scan(&goalsCounted); err != nil || goalsCounted != 1 {
		t.Errorf("contact_activity.goals %d (%v), want 1", goalsCounted, err)
	}
}

// copiesOn reads topic from the start until it has seen want records with
// envelope id id (or ctx ends) and returns how many it saw.
func copiesOn(ctx context.Context, t *testing.T, brokers []string, topic, id string, want int) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for n < want && ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 100)
		for _, r := range fs.Records() {
			var env schemas.Envelope
			if json.Unmarshal(r.Value, &env) == nil && env.ID == id {
				n++
			}
		}
	}
	return n
}
