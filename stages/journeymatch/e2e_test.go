package journeymatch_test

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
	"sendstream/sinks/journeys"
	"sendstream/stages/goals"
	"sendstream/stages/journeymatch"
	"sendstream/stages/webhookdelivery"
	"sendstream/stages/webhookfanout"
)

// TestMatchingThroughBroker runs the goals stage, the matching and
// started-announcing stages, the webhooks-topic fan-out and webhook delivery in the real runner on an
// in-process broker and the stack's Postgres. A recorded event of a
// contact published twice (a redelivery) starts exactly one execution of
// a listening once journey: its started announcement is on the journeys
// topic twice under one id, and a REST hook subscribed to JOURNEY_STARTED
// receives it once. A purchase goal named by the journey's exitOn then
// converts the execution with its value (JOURNEY_CONVERTED delivered).
func TestMatchingThroughBroker(t *testing.T) {
	pg := stack.PG(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws, contact := ingesttest.WorkspaceWithContact(ctx, t, pg, "journey matching", "jo@example.com")
	tpl := schemas.NewID()
	if _, err := pg.Exec(ctx, `INSERT INTO templates (id, workspace_id, html) VALUES ($1, $2, '<p>hi</p>')`, tpl, ws); err != nil {
		t.Fatal(err)
	}
	store := journeys.NewStore(pg, nil)
	d, err := schemas.ParseJourney([]byte(`{"name":"Browse","status":"active","reentry":"once","trigger":{"type":"event","event":"product.viewed"},
		"exitOn":{"goalType":"purchase"},"steps":[{"type":"delay","duration":"2d"},{"type":"send_email","templateId":"` + tpl + `"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	jr, _, err := store.Create(ctx, ws, d)
	if err != nil {
		t.Fatal(err)
	}
	j := jr.ID

	recv := pipelinetest.NewHookRecorder(t)
	for _, ev := range []string{schemas.WebhookJourneyStarted, schemas.WebhookJourneyConverted} {
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
		goals.Name, journeymatch.Name, journeymatch.NameStarted, webhookfanout.NameWebhooks, webhookdelivery.Name)
	defer stop()

	at := time.Now().UTC().Truncate(time.Millisecond)
	recorded := func(p schemas.EventPayload) schemas.Envelope {
		p.ContactID, p.Email, p.OccurredAt, p.ReceivedAt, p.Source = contact, "jo@example.com", at, at, schemas.EventSourceAPI
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return schemas.Envelope{ID: schemas.NewID(), Workspace: ws, Type: schemas.TypeEventRecorded, Key: ws + ":" + contact,
			OccurredAt: at, Payload: b}
	}
	view := recorded(schemas.EventPayload{Event: "product.viewed", Properties: json.RawMessage(`{"sku":"B2"}`)})
	if err := prod.Publish(ctx, schemas.TopicEvents, view); err != nil {
		t.Fatal(err)
	}
	recv.WaitFor(ctx, t, schemas.WebhookJourneyStarted, 1)
	if err := prod.Publish(ctx, schemas.TopicEvents, view); err != nil {
		t.Fatal(err)
	}
	exec := journeys.MatchedExecutionID(schemas.ChildID(view.ID, schemas.TypeEventMatched, 0), j)
	startedID := schemas.JourneyStartedEnvelopeID(exec)
	if n := pipelinetest.Copies(ctx, t, brokers, prefix+schemas.TopicJourneys, startedID, 2); n != 2 {
		t.Fatalf("started announcement %s is %d times on the journeys topic, want 2 (first handling and redelivery)", startedID, n)
	}
	var n int
	if err := pg.QueryRow(ctx, `SELECT count(*) FROM journey_executions WHERE journey_id = $1`, j).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d executions (%v), want 1", n, err)
	}

	if err := prod.Publish(ctx, schemas.TopicEvents, recorded(schemas.EventPayload{Event: "order", GoalType: schemas.GoalPurchase,
		Value: "42.5", Currency: "EUR"})); err != nil {
		t.Fatal(err)
	}
	recv.WaitFor(ctx, t, schemas.WebhookJourneyConverted, 1)
	time.Sleep(2 * time.Second) // the redelivered JOURNEY_STARTED's fan-out and delivery run meanwhile
	if s := recv.Bodies(schemas.WebhookJourneyStarted); len(s) != 1 {
		t.Errorf("%d JOURNEY_STARTED deliveries, want 1", len(s))
	} else if data, _ := s[0]["data"].(map[string]any); s[0]["id"] != schemas.JourneyWebhookID(exec, schemas.TypeWebhookJourneyStarted) ||
		data["executionId"] != exec || data["journeyId"] != j || data["email"] != "jo@example.com" || data["trigger"] != "event" {
		t.Errorf("JOURNEY_STARTED body %v", s[0])
	}
	c := recv.Bodies(schemas.WebhookJourneyConverted)
	if data, _ := c[0]["data"].(map[string]any); data["executionId"] != exec || data["value"] != 42.5 || data["goalType"] != "purchase" {
		t.Errorf("JOURNEY_CONVERTED body %v", c[0])
	}
	st, err := store.Stats(ctx, ws, j)
	if err != nil || st.Converted != 1 || st.Revenue != 42.5 || st.Active != 0 {
		t.Errorf("stats %+v (%v), want one conversion with revenue 42.5", st, err)
	}
}
