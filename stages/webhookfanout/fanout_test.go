package webhookfanout_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
	"sendstream/stages/webhookfanout"
)

func workspace(t *testing.T, pg *pgxpool.Pool) string {
	t.Helper()
	ws := "ws_" + schemas.NewID()
	if _, err := pg.Exec(context.Background(), `INSERT INTO workspaces (id, name) VALUES ($1, 'webhook fan-out test')`, ws); err != nil {
		t.Fatal(err)
	}
	return ws
}

func envelope(t *testing.T, ws, typ string, payload any) schemas.Envelope {
	t.Helper()
	p, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return schemas.Envelope{ID: schemas.NewID(), Workspace: ws, Type: typ, Key: ws + ":c1",
		OccurredAt: time.Date(2026, 11, 26, 10, 0, 0, 123e6, time.UTC), Payload: p}
}

// TestContactCreatedFansOut: a contact.created.v1 with two REST hooks to
// CONTACT_CREATED (and one to another event) gives two deliveries keyed by
// target and message (DeliveryKey), each with the spec 2.6 body; the same envelope again gives the
// same envelopes.
func TestContactCreatedFansOut(t *testing.T) {
	pg := stack.PG(t)
	ws := workspace(t, pg)
	a := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", "https://a.example.com/hook")
	b := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", "https://b.example.com/hook")
	ingesttest.Subscribe(t, pg, ws, "CONTACT_UPDATED", "https://c.example.com/hook")
	other := workspace(t, pg)
	ingesttest.Subscribe(t, pg, other, "CONTACT_CREATED", "https://d.example.com/hook")
	st := webhookfanout.New(schemas.ContactWebhookEvents, webhook.NewRESTHooks(pg))

	first := "Ada"
	env := envelope(t, ws, schemas.TypeContactCreated, schemas.ContactPayload{ContactID: "c1", Email: "ada@example.com", FirstName: &first,
		Status: "ACTIVE", CustomFields: json.RawMessage(`{"plan":"pro"}`), Metadata: json.RawMessage(`null`)})
	outs, err := st.Handle(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, o := range outs {
		var d schemas.WebhookDelivery
		if err := json.Unmarshal(o.Payload, &d); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, d.TargetID)
		if o.Type != schemas.TypeWebhookDelivery || o.Key != webhookfanout.DeliveryKey(ws, d.TargetID, env.ID) || o.Workspace != ws || o.CausationID != env.ID ||
			o.ID != schemas.ChildID(env.ID+"/"+d.TargetID, schemas.TypeWebhookDelivery, 1) {
			t.Errorf("envelope %+v", o)
		}
		if d.MessageID != env.ID || d.Event != "CONTACT_CREATED" || d.TargetKind != schemas.WebhookTargetSubscription || d.Attempt != 1 {
			t.Errorf("delivery %+v", d)
		}
		var body struct {
			ID        string         `json:"id"`
			Event     string         `json:"event"`
			Timestamp string         `json:"timestamp"`
			TeamID    string         `json:"teamId"`
			Data      map[string]any `json:"data"`
		}
		if err := json.Unmarshal(d.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.ID != env.ID || body.Event != "CONTACT_CREATED" || body.Timestamp != "2026-11-26T10:00:00.123Z" || body.TeamID != ws ||
			body.Data["contactId"] != "c1" || body.Data["email"] != "ada@example.com" || body.Data["firstName"] != "Ada" ||
			body.Data["customFields"].(map[string]any)["plan"] != "pro" {
			t.Errorf("body %s", d.Body)
		}
	}
	slices.Sort(targets)
	want := []string{a, b}
	slices.Sort(want)
	if !slices.Equal(targets, want) {
		t.Fatalf("targets %v, want %v", targets, want)
	}
	again, err := st.Handle(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(outs) {
		t.Fatalf("again: %d envelopes, want %d", len(again), len(outs))
	}
	for i := range outs {
		if again[i].ID != outs[i].ID || string(again[i].Payload) != string(outs[i].Payload) {
			t.Errorf("again: envelope %d differs", i)
		}
	}
}

// TestNothingFires: an internal type, an event nobody subscribed to, and
// an EVENT_RECORDED without a matched contact (spec 4.6) give nothing.
func TestNothingFires(t *testing.T) {
	pg := stack.PG(t)
	ws := workspace(t, pg)
	ingesttest.Subscribe(t, pg, ws, "EVENT_RECORDED", "https://a.example.com/hook")
	ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", "https://a.example.com/hook")
	contacts := webhookfanout.New(schemas.ContactWebhookEvents, webhook.NewRESTHooks(pg))
	events := webhookfanout.New(schemas.EventWebhookEvents, webhook.NewRESTHooks(pg))
	ctx := context.Background()
	cases := []struct {
		st  *webhookfanout.Stage
		env schemas.Envelope
	}{
		{contacts, envelope(t, ws, schemas.TypeContactJoinedList, schemas.ListMembershipPayload{ContactID: "c1", ListID: "l1"})},
		{contacts, envelope(t, ws, schemas.TypeContactUpdated, schemas.ContactPayload{ContactID: "c1", Email: "a@example.com"})},
		{events, envelope(t, ws, schemas.TypeWebhookEventRecorded, schemas.EventRecordedData{EventID: "e1", Event: "signup"})},
	}
	for i, c := range cases {
		outs, err := c.st.Handle(ctx, c.env)
		if err != nil || len(outs) != 0 {
			t.Errorf("case %d (%s): %d envelopes, err %v", i, c.env.Type, len(outs), err)
		}
	}
	// The same EVENT_RECORDED with a contact fires.
	outs, err := events.Handle(ctx, envelope(t, ws, schemas.TypeWebhookEventRecorded, schemas.EventRecordedData{EventID: "e1", Event: "signup", ContactID: "c1"}))
	if err != nil || len(outs) != 1 {
		t.Fatalf("matched EVENT_RECORDED: %d envelopes, err %v", len(outs), err)
	}
}

// TestEndpointsFanOut: an enabled dashboard endpoint that wants the event
// gets a delivery beside a REST hook, without its secret on the topic; a
// disabled one gets none.
func TestEndpointsFanOut(t *testing.T) {
	pg := stack.PG(t)
	ws := workspace(t, pg)
	ctx := context.Background()
	eps, err := webhook.NewEndpointStore(pg, webhook.EndpointStoreConfig{Secret: "fanout-test-secret-0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := webhook.NewSecret()
	on, err := eps.Create(ctx, ws, webhook.NewEndpoint{URL: "https://on.example.com/hook", Events: []string{"CONTACT_UPDATED", "CONTACT_CREATED"}, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	off, err := eps.Create(ctx, ws, webhook.NewEndpoint{URL: "https://off.example.com/hook", Events: []string{"CONTACT_CREATED"}, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eps.Disable(ctx, ws, off.ID, webhook.DisabledByOperator); err != nil {
		t.Fatal(err)
	}
	sub := ingesttest.Subscribe(t, pg, ws, "CONTACT_CREATED", "https://rest.example.com/hook")
	st := webhookfanout.New(schemas.ContactWebhookEvents, webhook.NewRESTHooks(pg), eps)
	outs, err := st.Handle(ctx, envelope(t, ws, schemas.TypeContactCreated, schemas.ContactPayload{ContactID: "c1", Email: "a@example.com"}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range outs {
		var d schemas.WebhookDelivery
		if err := json.Unmarshal(o.Payload, &d); err != nil {
			t.Fatal(err)
		}
		got[d.TargetID] = d.TargetKind
		if strings.Contains(string(o.Payload), secret) {
			t.Errorf("a delivery carries the endpoint's secret")
		}
	}
	if len(got) != 2 || got[on.ID] != schemas.WebhookTargetEndpoint || got[sub] != schemas.WebhookTargetSubscription {
		t.Fatalf("targets %v, want %s (endpoint) and %s (subscription)", got, on.ID, sub)
	}
}
