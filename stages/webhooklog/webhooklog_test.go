package webhooklog_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sendstream/deploy/stack"
	"sendstream/pipeline"
	"sendstream/schemas"
	whlog "sendstream/sinks/webhooklog"
	"sendstream/stages/webhooklog"
)

// TestTwoStagesOneLog: attempts are read from the attempts topic, bodies
// from the deliveries topic; neither stage publishes.
func TestTwoStagesOneLog(t *testing.T) {
	for name, topic := range map[string]string{webhooklog.Name: schemas.TopicWebhookAttempts, webhooklog.BodiesName: schemas.TopicWebhookDeliveries} {
		reg, ok := pipeline.Lookup(name)
		if !ok || reg.Consumes != topic || len(reg.Produces) != 0 {
			t.Errorf("stage %s: %+v, want it reading %s and producing nothing", name, reg, topic)
		}
	}
}

// TestAttemptsFromTheBrokerLoggedOnce runs both registered stages on the
// real broker and ClickHouse: every attempt published to the attempts topic
// becomes one webhook_attempts row with its fields, and every delivery one
// webhook_messages row per (message, target), even when an envelope is
// published again after its row was written.
func TestAttemptsFromTheBrokerLoggedOnce(t *testing.T) {
	e := stack.ForTest(t)
	ch := stack.CH(t)
	prefix := stack.TopicPrefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prod, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: e.Brokers(), TopicPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.EnsureTopics(ctx, schemas.AllTopics, 4); err != nil {
		t.Fatal(err)
	}
	stages, err := pipeline.SelectStages(webhooklog.Name, webhooklog.BodiesName)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(runCtx, pipeline.RunConfig{Brokers: e.Brokers(), TopicPrefix: prefix, Stages: stages,
			Resources:   pipeline.Resources{ClickHouse: ch, Publisher: prod},
			BackoffBase: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond, FlushInterval: 100 * time.Millisecond,
			MaxWait: 50 * time.Millisecond, Metrics: prometheus.NewRegistry(),
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("pipeline: %v", err)
		}
	}()

	ws := "ws-" + schemas.NewID()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	next := at.Add(time.Second)
	first := attemptEnv(t, ws, schemas.WebhookAttempt{MessageID: "m1", Event: "CONTACT_CREATED", TargetKind: schemas.WebhookTargetEndpoint,
		TargetID: "ep1", URL: "https://hooks.example/a", Attempt: 1, Outcome: schemas.WebhookOutcomeRetry, StatusCode: 503,
		DurationMs: 12.5, Error: "503 Service Unavailable", NextAttemptAt: &next, At: at})
	second := attemptEnv(t, ws, schemas.WebhookAttempt{MessageID: "m1", Event: "CONTACT_CREATED", TargetKind: schemas.WebhookTargetEndpoint,
		TargetID: "ep1", URL: "https://hooks.example/a", Attempt: 2, Outcome: schemas.WebhookOutcomeOK, StatusCode: 204,
		DurationMs: 3, At: next})
	body := []byte(`{"id":"m1","event":"CONTACT_CREATED","timestamp":"2026-03-04T05:06:07Z","teamId":"` + ws + `","data":{"email":"a<b>@x.test"}}`)
	d1 := deliveryEnv(t, ws, schemas.WebhookDelivery{MessageID: "m1", Event: "CONTACT_CREATED", TargetKind: schemas.WebhookTargetEndpoint,
		TargetID: "ep1", URL: "https://hooks.example/a", Attempt: 1, FirstAt: at, Body: body})
	d2 := deliveryEnv(t, ws, schemas.WebhookDelivery{MessageID: "m1", Event: "CONTACT_CREATED", TargetKind: schemas.WebhookTargetEndpoint,
		TargetID: "ep1", URL: "https://hooks.example/a", Attempt: 2, FirstAt: at, Body: body})

	// Both attempts, the first one twice in a row; both deliveries.
	if err := prod.Publish(ctx, schemas.TopicWebhookAttempts, first, first, second); err != nil {
		t.Fatal(err)
	}
	if err := prod.Publish(ctx, schemas.TopicWebhookDeliveries, d1, d2); err != nil {
		t.Fatal(err)
	}
	list := func() []whlog.Delivery {
		ds, err := whlog.Deliveries(ctx, ch, whlog.Filter{Workspace: ws, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	waitFor(t, "two attempts logged", func() bool { return len(list()) >= 2 })
	waitFor(t, "the body logged", func() bool { return countFinal(t, ch, "webhook_messages", ws) == 1 })

	// Published again after their rows were written, then a third attempt
	// with the same key (so after them in the partition): once it is
	// logged, the copies were written too, and each attempt is one row.
	third := attemptEnv(t, ws, schemas.WebhookAttempt{MessageID: "m2", Event: "CONTACT_CREATED", TargetKind: schemas.WebhookTargetEndpoint,
		TargetID: "ep1", URL: "https://hooks.example/a", Attempt: 1, Outcome: schemas.WebhookOutcomeOK, StatusCode: 200, At: at.Add(-time.Hour)})
	if err := prod.Publish(ctx, schemas.TopicWebhookAttempts, first, second, third); err != nil {
		t.Fatal(err)
	}
	marker := deliveryEnv(t, ws, schemas.WebhookDelivery{MessageID: "m2", Event: "CONTACT_CREATED", TargetKind: schemas.WebhookTargetEndpoint,
		TargetID: "ep1", URL: "https://hooks.example/a", Attempt: 1, FirstAt: at, Body: body})
	if err := prod.Publish(ctx, schemas.TopicWebhookDeliveries, d1, d2, marker); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the third attempt logged", func() bool { return len(list()) >= 3 })
	waitFor(t, "the second message's body logged", func() bool {
		m2, err := whlog.MessageTargets(ctx, ch, ws, "m2")
		if err != nil {
			t.Fatal(err)
		}
		return len(m2) == 1
	})
	if n := countFinal(t, ch, "webhook_attempts", ws); n != 3 {
		t.Fatalf("webhook_attempts FINAL: %d rows, want 3", n)
	}
	if n := countFinal(t, ch, "webhook_messages", ws); n != 2 {
		t.Fatalf("webhook_messages FINAL: %d rows, want 2 (m1 and m2 to ep1)", n)
	}
	ds := list()
	if len(ds) != 3 || ds[2].ID != third.ID {
		t.Fatalf("deliveries: %d rows, want 3, the oldest last: %+v", len(ds), ds)
	}
	got, old := ds[0], ds[1] // newest first
	if got.ID != second.ID || got.Attempt != 2 || got.Outcome != "ok" || got.StatusCode != 204 || got.NextAttemptAt != nil || !got.At.Equal(next) {
		t.Errorf("newest row: %+v", got)
	}
	if old.ID != first.ID || old.TargetKind != "endpoint" || old.TargetID != "ep1" || old.URL != "https://hooks.example/a" ||
		old.Event != "CONTACT_CREATED" || old.MessageID != "m1" || old.Attempt != 1 || old.Outcome != "retry" ||
		old.StatusCode != 503 || old.DurationMs != 12.5 || old.Error != "503 Service Unavailable" ||
		old.NextAttemptAt == nil || !old.NextAttemptAt.Equal(next) || !old.At.Equal(at) || old.Replay {
		t.Errorf("first attempt's row: %+v", old)
	}
	logged, err := whlog.MessageTargets(ctx, ch, ws, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if len(logged) != 1 || logged[0].Delivery.Attempt != 2 || string(logged[0].Delivery.Body) != string(body) || !logged[0].Delivery.FirstAt.Equal(at) {
		t.Fatalf("logged message: %+v", logged)
	}
}

// TestMalformedEnvelopesArePermanent: an attempt or delivery that cannot
// make a row goes to the dead-letter topic instead of being retried.
func TestMalformedEnvelopesArePermanent(t *testing.T) {
	st, err := webhooklog.New(context.Background(), pipeline.Resources{ClickHouse: stack.CH(t)}, webhooklog.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []schemas.Envelope{
		{ID: "a", Type: schemas.TypeWebhookAttempt, Payload: []byte(`[1]`)},
		{ID: "b", Type: schemas.TypeWebhookAttempt, Payload: []byte(`{"messageId":"m","targetId":"t","at":"0001-01-01T00:00:00Z"}`)},
		{ID: "c", Type: schemas.TypeWebhookAttempt, Payload: []byte(`{"targetId":"t","at":"2026-01-01T00:00:00Z"}`)},
		{ID: "d", Type: schemas.TypeWebhookDelivery, Payload: []byte(`{"messageId":"m","targetId":"t","firstAt":"2026-01-01T00:00:00Z"}`)},
	} {
		if _, err := st.Handle(context.Background(), env); !pipeline.IsPermanent(err) {
			t.Errorf("envelope %s: %v, want a permanent error", env.ID, err)
		}
	}
	if _, err := st.Handle(context.Background(), schemas.Envelope{ID: "x", Type: "other.v1", Payload: []byte(`{}`)}); err != nil {
		t.Errorf("another type: %v", err)
	}
}
