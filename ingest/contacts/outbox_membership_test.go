package contacts_test

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

// relayAll runs the relay without grace until ws's outbox is empty (only
// ws's rows: other tests share the database).
func (e *env) relayAll(t *testing.T, pub *pipeline.Producer, ws string) {
	t.Helper()
	for {
		n, err := e.store.RelayWorkspaceOnce(context.Background(), pub, ws, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// TestOutboxRelaysMembershipEvents: subscriptions (of a new and of an
// existing contact), an unsubscribe, a double opt-in sign-up and its
// confirmation write their events into contact_outbox in their own
// transaction. With every publish failing, each answers 503 saying the
// events will still be delivered; the relay then publishes each change's
// events once, under the request's causation id, on their topics.
func TestOutboxRelaysMembershipEvents(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	l := e.list(t, ws, "L", false)
	d := e.list(t, ws, "D", true)

	var a upsertResp
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": "a@example.com"}, &a)
	waitFor(t, "the published upsert's outbox row to go", 10*time.Second, func() bool { return e.outboxRows(t, ws) == 0 })

	if err := e.Publisher.Close(); err != nil { // every publish of the server fails from here on
		t.Fatal(err)
	}
	outboxed := func(what string, st int, body []byte) {
		t.Helper()
		var eb errBody
		_ = json.Unmarshal(body, &eb)
		if st != 503 || !strings.Contains(eb.Error, "will still be delivered") {
			t.Fatalf("%s with publishing down: %d %s, want a 503 saying the events will still be delivered", what, st, body)
		}
	}
	st, body := e.Do("POST", "/api/v1/lists/"+l.ID+"/subscribe", key, map[string]any{"email": "c@example.com"})
	outboxed("subscribe of a new contact", st, body)
	st, body = e.Do("POST", "/api/v1/lists/"+l.ID+"/subscribe", key, map[string]any{"contactId": a.ID})
	outboxed("subscribe of an existing contact", st, body)
	st, body = e.Do("POST", "/api/v1/lists/"+l.ID+"/unsubscribe", key, map[string]any{"contactId": a.ID})
	outboxed("unsubscribe", st, body)
	st, body = e.raw(t, "POST", "/forms/"+d.ID, "", "application/json", `{"email":"d@example.com"}`, nil)
	outboxed("double opt-in sign-up", st, body)
	// created+added+joined, added+joined, removed, created+opt-in.
	if n := e.outboxRows(t, ws); n != 8 {
		t.Fatalf("%d outbox rows after four committed, unpublished writes, want 8", n)
	}

	pub, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: e.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	e.relayAll(t, pub, ws)
	reqs := e.optIns(t, ws)
	if len(reqs) != 1 || reqs[0].Email != "d@example.com" {
		t.Fatalf("relayed opt-in requests: %+v", reqs)
	}
	st, body = e.follow(t, reqs[0].ConfirmURL, true)
	outboxed("confirmation", st, body)
	if n := e.outboxRows(t, ws); n != 3 { // subscription confirmed, joined, contact confirmed
		t.Fatalf("%d outbox rows after the confirmation, want 3", n)
	}
	e.relayAll(t, pub, ws)
	if n := e.outboxRows(t, ws); n != 0 {
		t.Fatalf("%d outbox rows left after the relay", n)
	}

	contactOf := map[string]string{} // contact id -> email
	ids := map[string]map[string]int{}
	for _, env := range e.events(t, ws) {
		var p struct {
			ContactID string `json:"contactId"`
			Email     string `json:"email"`
		}
		mustDecode(t, env.Payload, &p)
		contactOf[p.ContactID] = p.Email
		k := p.Email + " " + env.Type
		if ids[k] == nil {
			ids[k] = map[string]int{}
		}
		ids[k][env.ID]++
		if env.CausationID == "" {
			t.Errorf("%s of %s carries no causation id (the request id)", env.Type, p.Email)
		}
	}
	for _, k := range []string{
		"a@example.com " + schemas.TypeContactCreated,
		"a@example.com " + schemas.TypeContactAddedToList,
		"a@example.com " + schemas.TypeContactJoinedList,
		"a@example.com " + schemas.TypeContactRemovedFromList,
		"c@example.com " + schemas.TypeContactCreated,
		"c@example.com " + schemas.TypeContactAddedToList,
		"c@example.com " + schemas.TypeContactJoinedList,
		"d@example.com " + schemas.TypeContactCreated,
		"d@example.com " + schemas.TypeOptInRequested,
		"d@example.com " + schemas.TypeListSubscriptionConfirmed,
		"d@example.com " + schemas.TypeContactJoinedList,
		"d@example.com " + schemas.TypeContactConfirmed,
	} {
		if len(ids[k]) != 1 {
			t.Errorf("%s: %d envelope ids, want one", k, len(ids[k]))
		}
		for id, n := range ids[k] {
			if n != 1 {
				t.Errorf("%s %s: %d records, want one", k, id, n)
			}
		}
		delete(ids, k)
	}
	for k, v := range ids {
		t.Errorf("unexpected %s: %v", k, v)
	}
}
