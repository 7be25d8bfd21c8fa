package schemas_test

import (
	"encoding/json"
	"testing"

	"sendstream/schemas"
	"sendstream/schemas/schemastest"
)

// Every webhook event name an envelope type maps to, and every name spec 6
// gives, is in the catalogue, and the OpenAPI document's webhooks section
// has one operation per catalogue entry whose body carries its data schema.
func TestWebhookCatalogue(t *testing.T) {
	var names []string
	for _, m := range []map[string]string{schemas.ContactWebhookEvents, schemas.EventWebhookEvents, schemas.TransactionalWebhookEvents} {
		for _, n := range m {
			names = append(names, n)
		}
	}
	names = append(names, "EMAIL_BOUNCED", "EMAIL_DELIVERED", "TRANSACTIONAL_SENT", "CONTACT_CREATED", "CONTACT_ADDED_TO_LIST",
		"EVENT_RECORDED", "LIST_SUBSCRIPTION_CONFIRMED", "CONTACT_CONFIRMED", "CONTACT_UPDATED", "CONTACT_UNSUBSCRIBED",
		"CONTACT_REMOVED_FROM_LIST", "GOAL_RECORDED", "EMAIL_COMPLAINED", "TRANSACTIONAL_FAILED")
	for _, n := range names {
		if _, ok := schemas.LookupWebhookEvent(n); !ok {
			t.Errorf("%s is not in the webhook event catalogue", n)
		}
	}
	docHooks := schemastest.OpenAPIWebhooks(t)
	evs := schemas.WebhookEvents()
	if len(docHooks) != len(evs) {
		t.Errorf("webhooks section has %d operations, the catalogue %d types", len(docHooks), len(evs))
	}
	for _, e := range evs {
		op, ok := docHooks[e.Name]
		if !ok {
			t.Errorf("%s: no operation in the OpenAPI webhooks section", e.Name)
			continue
		}
		if ja, jb := schemastest.Canonical(t, op.Data), schemastest.Canonical(t, e.Data); ja != jb {
			t.Errorf("%s: OpenAPI data schema %s, catalogue %s", e.Name, ja, jb)
		}
	}
	// The payload fields spec 6 gives.
	for name, fields := range map[string][]string{
		"EMAIL_BOUNCED":               {"email", "messageId", "provider", "type", "reason", "occurredAt"},
		"LIST_SUBSCRIPTION_CONFIRMED": {"contactId", "email", "listId", "listName"},
		"CONTACT_CONFIRMED":           {"contactId", "email"},
	} {
		e, _ := schemas.LookupWebhookEvent(name)
		var s struct {
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(e.Data, &s); err != nil {
			t.Fatal(err)
		}
		for _, f := range fields {
			found := false
			for _, r := range s.Required {
				found = found || r == f
			}
			if !found {
				t.Errorf("%s: %s is not a required data field", name, f)
			}
		}
	}
}

func TestRegisterWebhookEventRefuses(t *testing.T) {
	for name, e := range map[string]schemas.WebhookEvent{
		"duplicate":   {Name: "CONTACT_CREATED", Description: "x", Data: json.RawMessage(`{}`)},
		"lower case":  {Name: "contact_created", Description: "x", Data: json.RawMessage(`{}`)},
		"no schema":   {Name: "NEW_THING", Description: "x"},
		"no describe": {Name: "NEW_THING", Data: json.RawMessage(`{}`)},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registered", name)
				}
			}()
			schemas.RegisterWebhookEvent(e)
		}()
	}
}
