package journeymatch_test

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
	"sendstream/sinks/journeys"
	"sendstream/sinks/webhook/webhooktest"
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
	ws, _, err := auth.NewStore(pg).CreateWorkspace(ctx, auth.NewWorkspace{Name: "journey matching", Plan: "pro"})
	if err != nil {
		t.Fatal(err)
	}
	cs := contacts.NewStore(pg)
	defer cs.Close()
	up, err := cs.Upsert(ctx, ws, contacts.UpsertInput{Email: "jo@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	contact := up.Contact.ID
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

	var mu sync.Mutex
	got := map[string][]map[string]any{}
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
	for _, ev := range []string{schemas.WebhookJourneyStarted, schemas.WebhookJourneyConverted} {
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
	stages, err := pipeline.SelectStages(goals.Name, journeymatch.Name, journeymatch.NameStarted, webhookfanout.NameWebhooks, webhookdelivery.Name)
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
	waitFor(schemas.WebhookJourneyStarted, 1)
	if err := prod.Publish(ctx, schemas.TopicEvents, view); err != nil {
		t.Fatal(err)
	}
	exec := journeys.MatchedExecutionID(schemas.ChildID(view.ID, schemas.TypeEventMatched, 0), j)
	startedID := schemas.JourneyStartedEnvelopeID(exec)
	if n := copiesOn(ctx, t, brokers, prefix+schemas.TopicJourneys, startedID, 2); n != 2 {
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
	waitFor(schemas.WebhookJourneyConverted, 1)
	time.Sleep(2 * time.Second) // the redelivered JOURNEY_STARTED's fan-out and delivery run meanwhile
	if s := bodies(schemas.WebhookJourneyStarted); len(s) != 1 {
		t.Errorf("%d JOURNEY_STARTED deliveries, want 1", len(s))
	} else if data, _ := s[0]["data"].(map[string]any); s[0]["id"] != schemas.JourneyWebhookID(exec, schemas.TypeWebhookJourneyStarted) ||
		data["executionId"] != exec || data["journeyId"] != j || data["email"] != "jo@example.com" || data["trigger"] != "event" {
		t.Errorf("JOURNEY_STARTED body %v", s[0])
	}
	c := bodies(schemas.WebhookJourneyConverted)
	if data, _ := c[0]["data"].(map[string]any); data["executionId"] != exec || data["value"] != 42.5 || data["goalType"] != "purchase" {
		t.Errorf("JOURNEY_CONVERTED body %v", c[0])
	}
	st, err := store.Stats(ctx, ws, j)
	if err != nil || st.Converted != 1 || st.Revenue != 42.5 || st.Active != 0 {
		t.Errorf("stats %+v (%v), want one conversion with revenue 42.5", st, err)
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
