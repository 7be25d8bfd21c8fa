package webhookdelivery_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sendstream/deploy/stack"
	"sendstream/ingest/ingesttest"
	"sendstream/pipeline"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/webhook/webhooktest"
	"sendstream/stages/webhookdelivery"
	"sendstream/stages/webhookfanout"
)

// TestContactCreatedReachesSubscriber runs the fan-out and delivery stages
// in the real runner against an in-process Kafka-protocol broker and the
// stack's Postgres: contact.created.v1 envelopes published as ingest does
// reach a REST hook subscribed to CONTACT_CREATED with the spec 2.6 body,
// and the delivery log gets an ok attempt for each, while another
// subscriber's receiver hangs the whole time (its key holds only itself).
func TestContactCreatedReachesSubscriber(t *testing.T) {
	pg := pgFor(t)
	ws := workspace(t, pg)
	bodies := make(chan []byte, 16)
	fast := webhooktest.NewReceiver(t, false, func(w http.ResponseWriter, r *http.Request) {
		var b json.RawMessage
		_ = json.NewDecoder(r.Body).Decode(&b)
		bodies <- b
		w.WriteHeader(204)
	})
	release := make(chan struct{})
	var hanging atomic.Int64
	slow := webhooktest.NewReceiver(t, false, func(w http.ResponseWriter, r *http.Request) {
		hanging.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	var once sync.Once
	unhang := func() { once.Do(func() { close(release) }) }
	slowSub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", slow.URL)
	fastSub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", fast.URL)

	prefix := stack.TopicPrefix(t)
	brokers := pipelinetest.Cluster(t, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prod, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: brokers, TopicPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	stages, err := pipeline.SelectStages(webhookfanout.NameContacts, webhookdelivery.Name)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() {
		runErr <- pipeline.Run(runCtx, pipeline.RunConfig{Brokers: brokers, TopicPrefix: prefix, Stages: stages,
			Resources: pipeline.Resources{Postgres: pg, Publisher: prod,
				Settings: map[string]string{"webhook_allow_private": "127.0.0.0/8", "secret": "e2e-test-secret-0123456789abcdef", "topic_prefix": prefix}}})
	}()
	defer func() {
		stopRun()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// Runs before the runner stops, so the drain does not wait out the
	// hanging receiver's time-outs.
	defer unhang()

	var envs []schemas.Envelope
	for i := range 3 {
		p, _ := json.Marshal(schemas.ContactPayload{ContactID: "c" + string(rune('1'+i)), Email: "a@example.com", Status: "ACTIVE",
			CustomFields: json.RawMessage(`{}`), Metadata: json.RawMessage(`null`), CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()})
		envs = append(envs, schemas.Envelope{ID: schemas.NewID(), Workspace: ws, Type: schemas.TypeContactCreated,
			Key: ws + ":c" + string(rune('1'+i)), OccurredAt: time.Now().UTC(), Payload: p})
	}
	if err := prod.Publish(ctx, schemas.TopicContacts, envs...); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < len(envs) {
		select {
		case b := <-bodies:
			var body struct {
				ID, Event, Timestamp, TeamID string
				Data                         map[string]any
			}
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatal(err)
			}
			if body.Event != "CONTACT_CREATED" || body.TeamID != ws || body.Timestamp == "" || body.Data["email"] != "a@example.com" {
				t.Errorf("body %s", b)
			}
			got[body.ID] = true
		case <-ctx.Done():
			t.Fatalf("%d of %d deliveries arrived", len(got), len(envs))
		}
	}
	for _, e := range envs {
		if !got[e.ID] {
			t.Errorf("no delivery with id %s", e.ID)
		}
	}
	for hanging.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the hanging receiver was never called")
		case <-time.After(20 * time.Millisecond):
		}
	}

	// The delivery log: an ok attempt per event for the fast target.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(prefix+schemas.TopicWebhookAttempts),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ok := map[string]bool{}
	for len(ok) < len(envs) {
		fs := cl.PollRecords(ctx, 100)
		if ctx.Err() != nil {
			t.Fatalf("%d ok attempts logged, want %d", len(ok), len(envs))
		}
		for _, r := range fs.Records() {
			var env schemas.Envelope
			var a schemas.WebhookAttempt
			if json.Unmarshal(r.Value, &env) != nil || json.Unmarshal(env.Payload, &a) != nil {
				t.Fatalf("attempt record %s", r.Value)
			}
			if a.TargetID == slowSub {
				t.Errorf("an attempt of the hanging target was logged while it hangs: %+v", a)
			}
			if a.TargetID == fastSub && a.Outcome == schemas.WebhookOutcomeOK && a.StatusCode == 204 {
				ok[a.MessageID] = true
			}
		}
	}
}
