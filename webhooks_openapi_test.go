package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"sendstream/schemas"
	"sendstream/sinks/webhook"
	"sendstream/stages/webhookfanout"
)

// oneTarget is a fan-out Source with one REST hook wanting every event: a
// fake, beside the real stack's fan-out tests, so that every event type's
// body can be built from its producer's payload without producing it.
type oneTarget struct{}

func (oneTarget) Matching(context.Context, string, string) ([]webhook.Hook, error) {
	return []webhook.Hook{{Kind: schemas.WebhookTargetSubscription, ID: "hook1", URL: "https://8.8.8.8/"}}, nil
}

// payloadSample is one payload of an envelope type, encoded the way its
// producer encodes it. full sets every member the producer can set.
type payloadSample struct {
	name string
	full bool
	raw  []byte
}

// webhookPayloadSamples returns, per envelope type the fan-out maps to a
// public event, a payload with every member set and one with only what
// is always set, each encoded as the producer encodes it (the fast
// encoders of schemas where the producer uses them, else json.Marshal).
func webhookPayloadSamples(t *testing.T) map[string][]payloadSample {
	t.Helper()
	at := time.Date(2026, 11, 26, 12, 0, 0, 123e6, time.UTC)
	str := func(s string) *string { return &s }
	must := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	marshal := func(v any) []byte { return must(json.Marshal(v)) }
	contact := func(p schemas.ContactPayload) []byte { return must(schemas.AppendContactPayload(nil, &p)) }
	fullContact := schemas.ContactPayload{ContactID: "c1", Email: "ada@example.com", FirstName: str("Ada"), Country: str("GB"),
		Language: str("en"), Status: "ACTIVE", Source: str("api"), CustomFields: json.RawMessage(`{"plan":"pro"}`),
		Metadata: json.RawMessage(`{"crm":7}`), CreatedAt: at, UpdatedAt: at}
	minContact := schemas.ContactPayload{ContactID: "c1", Email: "ada@example.com", Status: "PENDING",
		CustomFields: json.RawMessage(`{}`), CreatedAt: at, UpdatedAt: at}
	updated := func(p schemas.ContactPayload) schemas.ContactPayload {
		p.UpdatedFields = []string{"firstName", "customFields.plan"}
		return p
	}
	member := func(status, via string) []byte {
		return marshal(schemas.ListMembershipPayload{ContactID: "c1", Email: "ada@example.com", ListID: "l1", ListName: "News", Status: status, Via: via})
	}
	fullEvent := schemas.EventRecordedData{EventID: "e1", Event: "purchase", ContactID: "c1", Email: "ada@example.com",
		GoalType: schemas.GoalPurchase, Value: "19.99", Currency: "EUR", ExternalID: "order-1", OccurredAt: at,
		Properties: json.RawMessage(`{"sku":"A1"}`)}
	minEvent := schemas.EventRecordedData{EventID: "e1", Event: "login", ContactID: "c1", OccurredAt: at}
	fullMsg := schemas.MessageEventData{MessageID: "m1", RFCMessageID: "m1@example.com", Email: "ada@example.com",
		ExternalID: "x1", Provider: "smtp", OccurredAt: at}
	minMsg := schemas.MessageEventData{MessageID: "m1", Email: "ada@example.com", Provider: "smtp", OccurredAt: at}
	fullFailed := schemas.TransactionalFailedData{MessageID: "m1", RFCMessageID: "m1@example.com", Email: "ada@example.com",
		ExternalID: "x1", Provider: "smtp", Reason: "provider refused the message: 550 no such user", OccurredAt: at}
	minFailed := schemas.TransactionalFailedData{MessageID: "m1", Email: "ada@example.com", Provider: "smtp",
		Reason: "delivery failed", OccurredAt: at}
	journey := schemas.JourneyWebhookData{JourneyID: "j1", JourneyName: "Welcome", ExecutionID: "x1", Version: 2, ContactID: "c1",
		Email: "ada@example.com", OccurredAt: at}
	started, converted, convertedPlain := journey, journey, journey
	started.Trigger = schemas.TriggerEvent
	converted.EventID, converted.Event, converted.GoalType, converted.Value, converted.Currency = "e1", "order", schemas.GoalPurchase, "19.99", "EUR"
	convertedPlain.EventID, convertedPlain.Event = "e1", "upgraded"
	journeyEnv := func(typ string, d schemas.JourneyWebhookData) []byte {
		return schemas.JourneyWebhookEnvelope("ws1", typ, "cause", d).Payload
	}
	return map[string][]payloadSample{
		// The journey events: stages/journeymatch builds them with
		// schemas.JourneyWebhookEnvelope.
		schemas.TypeWebhookJourneyStarted:   {{"full", true, journeyEnv(schemas.TypeWebhookJourneyStarted, started)}},
		schemas.TypeWebhookJourneyCompleted: {{"full", true, journeyEnv(schemas.TypeWebhookJourneyCompleted, journey)}},
		schemas.TypeWebhookJourneyConverted: {{"goal", true, journeyEnv(schemas.TypeWebhookJourneyConverted, converted)},
			{"event", false, journeyEnv(schemas.TypeWebhookJourneyConverted, convertedPlain)}},
		// CONTACT_UNSUBSCRIBED: the envelope ingest/transactional's
		// unsubscribe writes, built by the same function.
		schemas.TypeContactUnsubscribed: {{"full", true, schemas.ContactUnsubscribed("ws1", "c1", "ada@example.com", at, "m1").Payload}},
		// GOAL_RECORDED: the goals stage encodes it as EVENT_RECORDED.
		schemas.TypeWebhookGoalRecorded: {{"full", true, schemas.AppendEventRecordedData(nil, &fullEvent)},
			{"minimal", false, schemas.AppendEventRecordedData(nil, &schemas.EventRecordedData{EventID: "e1", Event: "signup",
				ContactID: "c1", GoalType: schemas.GoalSignup, OccurredAt: at})}},
		// TRANSACTIONAL_FAILED: the delivery stage uses json.Marshal.
		schemas.TypeWebhookTransactionalFailed: {{"full", true, marshal(fullFailed)}, {"minimal", false, marshal(minFailed)}},
		schemas.TypeContactCreated:             {{"full", true, contact(fullContact)}, {"minimal", false, contact(minContact)}},
		schemas.TypeContactUpdated:             {{"full", true, contact(updated(fullContact))}, {"minimal", false, contact(updated(minContact))}},
		schemas.TypeContactAddedToList:         {{"api", true, member("ACTIVE", "api")}, {"form", true, member("ACTIVE", "form")}},
		schemas.TypeContactRemovedFromList:     {{"api", true, member("UNSUBSCRIBED", "api")}},
		schemas.TypeListSubscriptionConfirmed:  {{"confirmation", true, member("ACTIVE", "confirmation")}},
		schemas.TypeContactConfirmed:           {{"full", true, marshal(schemas.ContactConfirmedPayload{ContactID: "c1", Email: "ada@example.com"})}},
		schemas.TypeWebhookEventRecorded: {{"full", true, schemas.AppendEventRecordedData(nil, &fullEvent)},
			{"minimal", false, schemas.AppendEventRecordedData(nil, &minEvent)}},
		// TRANSACTIONAL_SENT: the delivery stage's encoder; the reports use json.Marshal.
		schemas.TypeWebhookTransactionalSent: {{"full", true, must(schemas.AppendMessageEventData(nil, &fullMsg))},
			{"minimal", false, must(schemas.AppendMessageEventData(nil, &minMsg))}},
		schemas.TypeWebhookEmailDelivered: {{"full", true, marshal(fullMsg)}, {"minimal", false, marshal(minMsg)}},
		schemas.TypeWebhookEmailBounced: {
			{"full", true, marshal(schemas.EmailBouncedData{Email: "ada@example.com", MessageID: "m1", Provider: "smtp", Type: "hard",
				Reason: "550 no such user", OccurredAt: at, RFCMessageID: "m1@example.com", ExternalID: "x1"})},
			{"minimal", false, marshal(schemas.EmailBouncedData{Email: "ada@example.com", MessageID: "m1", Provider: "smtp", Type: "soft",
				Reason: "mailbox full", OccurredAt: at})}},
		schemas.TypeWebhookEmailComplained: {
			{"full", true, marshal(schemas.EmailComplainedData{Email: "ada@example.com", MessageID: "m1", Provider: "smtp", Type: "abuse",
				OccurredAt: at, RFCMessageID: "m1@example.com", ExternalID: "x1"})},
			{"minimal", false, marshal(schemas.EmailComplainedData{Email: "ada@example.com", MessageID: "m1", Provider: "smtp",
				Type: "complaint", OccurredAt: at})}},
	}
}

// webhookDoc is the `webhooks` section of the assembled OpenAPI document.
type webhookDoc map[string]struct {
	Post struct {
		Description string `json:"description"`
		RequestBody struct {
			Content map[string]struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"content"`
		} `json:"requestBody"`
	} `json:"post"`
}

// TestWebhookPayloadsMatchDocument (issue 25 item 9): for every envelope
// type the fan-out maps to a public event, the body the real fan-out stage
// builds from the producer's payload validates against that event's
// operation in the OpenAPI document's `webhooks` section; the fully set
// payload delivers every `data` member the document lists (it promises
// nothing that is never sent) and the producer publishes no member the
// document leaves out (the fan-out would drop it unseen). Every catalogue
// type has a producer (an envelope type mapped to it).
func TestWebhookPayloadsMatchDocument(t *testing.T) {
	raw, err := schemas.OpenAPI("http://127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Webhooks webhookDoc `json:"webhooks"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	samples := webhookPayloadSamples(t)
	produced := map[string]bool{}
	for _, events := range []map[string]string{schemas.ContactWebhookEvents, schemas.EventWebhookEvents, schemas.TransactionalWebhookEvents} {
		stage := webhookfanout.New(events, oneTarget{})
		for typ, name := range events {
			produced[name] = true
			op, ok := doc.Webhooks[name]
			if !ok {
				t.Errorf("%s (%s): no operation in the document's webhooks section", name, typ)
				continue
			}
			schemaJSON := op.Post.RequestBody.Content["application/json"].Schema
			sch := compileSchema(t, name, schemaJSON)
			documented := dataProperties(t, schemaJSON)
			if len(samples[typ]) == 0 {
				t.Errorf("%s (%s): no sample payload in webhookPayloadSamples; add one as its producer encodes it", name, typ)
			}
			for _, s := range samples[typ] {
				body := fanOutBody(t, stage, typ, s.raw)
				if body == nil {
					t.Errorf("%s %s: the fan-out delivered nothing", name, s.name)
					continue
				}
				inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if err := sch.Validate(inst); err != nil {
					t.Errorf("%s %s: the delivery does not match the document: %v\n%s", name, s.name, err, body)
				}
				var sent struct {
					Data map[string]json.RawMessage `json:"data"`
				}
				_ = json.Unmarshal(body, &sent)
				var published map[string]json.RawMessage
				_ = json.Unmarshal(s.raw, &published)
				for k := range published {
					if !documented[k] {
						t.Errorf("%s %s: the producer publishes %q, which the document does not list (the fan-out drops it)", name, s.name, k)
					}
				}
				if s.full {
					for k := range documented {
						if _, ok := sent.Data[k]; !ok {
							t.Errorf("%s %s: the document lists data.%s, which the delivery never carries", name, s.name, k)
						}
					}
				}
			}
		}
	}
	// Every catalogued event has a producer: an envelope type mapped to it
	// (the checks above then run its payload through the fan-out).
	for _, e := range schemas.WebhookEvents() {
		if !produced[e.Name] {
			t.Errorf("%s is in the catalogue (and the document) but no envelope type maps to it: nothing would ever deliver it", e.Name)
		}
		if strings.Contains(doc.Webhooks[e.Name].Post.Description, "Not emitted") {
			t.Errorf("%s: the document still says it is not emitted", e.Name)
		}
	}
}

// fanOutBody runs one envelope of type typ through the fan-out stage and
// returns the body of its single delivery (nil when none).
func fanOutBody(t *testing.T, stage *webhookfanout.Stage, typ string, payload []byte) []byte {
	t.Helper()
	env := schemas.Envelope{ID: schemas.NewID(), Workspace: "ws1", Type: typ, Key: "ws1:c1",
		OccurredAt: time.Date(2026, 11, 26, 12, 0, 1, 0, time.UTC), Payload: payload}
	out, err := stage.Handle(context.Background(), env)
	if err != nil {
		t.Fatalf("fan-out of %s: %v", typ, err)
	}
	if len(out) != 1 {
		return nil
	}
	var d schemas.WebhookDelivery
	if err := json.Unmarshal(out[0].Payload, &d); err != nil {
		t.Fatal(err)
	}
	return d.Body
}

// compileSchema compiles one JSON Schema (2020-12) of the document.
func compileSchema(t *testing.T, name string, schemaJSON json.RawMessage) *jsonschema.Schema {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		t.Fatalf("%s schema: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	url := "mem:///webhooks/" + name + ".json"
	if err := c.AddResource(url, v); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s schema: %v", name, err)
	}
	return sch
}

// dataProperties returns the members the document lists under the body's
// data.
func dataProperties(t *testing.T, schemaJSON json.RawMessage) map[string]bool {
	t.Helper()
	var s struct {
		Properties struct {
			Data struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"data"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schemaJSON, &s); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for k := range s.Properties.Data.Properties {
		out[k] = true
	}
	return out
}
