package contacts_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/pipeline"
	"sendstream/schemas"
)

// outboxRows counts ws's contact_outbox rows.
func (e *env) outboxRows(t *testing.T, ws string) int64 {
	return e.count(t, "SELECT count(*) FROM contact_outbox WHERE workspace_id = $1", ws)
}

// TestOutboxRelaysWhatAFailedPublishLeft: every contact change writes its
// event into contact_outbox in its own transaction; a published request
// deletes the row; a change whose publish failed after the commit keeps its
// row, and the relay publishes it after the grace period, once, under the
// id the request would have used, even with several relays at once
// (FOR UPDATE SKIP LOCKED).
func TestOutboxRelaysWhatAFailedPublishLeft(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	l := e.list(t, ws, "L", false)

	var a upsertResp
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": "a@example.com"}, &a)
	waitFor(t, "the published upsert's outbox row to go", 10*time.Second, func() bool { return e.outboxRows(t, ws) == 0 })

	if err := e.Publisher.Close(); err != nil { // every publish of the server fails from here on
		t.Fatal(err)
	}
	for _, body := range []map[string]any{{"email": "b@example.com", "firstName": "Bea"}, {"email": "a@example.com", "firstName": "Ann"}} {
		var eb errBody
		e.mustCall(t, 503, "POST", "/api/v1/contacts", key, body, &eb)
		if !strings.Contains(eb.Error, "stored") || !strings.Contains(eb.Error, "will still be delivered") {
			t.Errorf("503 of an upsert whose events are in the outbox: %q", eb.Error)
		}
	}
	e.mustCall(t, 503, "POST", "/api/v1/lists/"+l.ID+"/subscribe", key, map[string]any{"email": "c@example.com"}, nil)
	// b created, a updated, and c's creation, list membership and
	// joined_list of the subscribe.
	if n := e.outboxRows(t, ws); n != 5 {
		t.Fatalf("%d outbox rows after three committed, unpublished writes, want 5", n)
	}

	pub, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: e.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	// Within the grace period a request may still be publishing: nothing
	// is taken.
	if n, err := e.store.RelayWorkspaceOnce(ctx, pub, ws, time.Hour, 100); err != nil || n != 0 {
		t.Fatalf("relay within the grace period: %d rows, %v", n, err)
	}
	// Four relays racing, one row per round each.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := e.store.RelayWorkspaceOnce(ctx, pub, ws, 0, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := e.outboxRows(t, ws); n != 0 {
		t.Fatalf("%d outbox rows left after the relay", n)
	}

	var ids = map[string]string{}
	rows, err := e.pool.Query(ctx, "SELECT email, id FROM contacts WHERE workspace_id = $1", ws)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var email, id string
		if err := rows.Scan(&email, &id); err != nil {
			t.Fatal(err)
		}
		ids[email] = id
	}
	rows.Close()
	var updatedAt time.Time
	if err := e.pool.QueryRow(ctx, "SELECT updated_at FROM contacts WHERE id = $1", a.ID).Scan(&updatedAt); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // envelope id -> type: the ids the requests would have published
		schemas.IDFromKey(ws, schemas.TypeContactCreated, a.ID):                                              schemas.TypeContactCreated,
		schemas.IDFromKey(ws, schemas.TypeContactCreated, ids["b@example.com"]):                              schemas.TypeContactCreated,
		schemas.IDFromKey(ws, schemas.TypeContactCreated, ids["c@example.com"]):                              schemas.TypeContactCreated,
		schemas.IDFromKey(ws, schemas.TypeContactUpdated, a.ID+"@"+updatedAt.UTC().Format(time.RFC3339Nano)): schemas.TypeContactUpdated,
	}
	seen := map[string]int{}
	for _, env := range e.topicEvents(t, schemas.TopicContacts, ws) {
		if env.Type != schemas.TypeContactCreated && env.Type != schemas.TypeContactUpdated {
			continue
		}
		seen[env.ID]++
		if env.CausationID == "" {
			t.Errorf("relayed %s %s carries no causation id (the request id)", env.Type, env.ID)
		}
		if want[env.ID] != env.Type {
			t.Errorf("unexpected %s %s: %s", env.Type, env.ID, env.Payload)
		}
		var p schemas.ContactPayload
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			t.Fatal(err)
		}
		switch {
		case p.Email == "b@example.com" && (p.FirstName == nil || *p.FirstName != "Bea"):
			t.Errorf("relayed contact.created of b: %s", env.Payload)
		case env.Type == schemas.TypeContactUpdated && (len(p.UpdatedFields) != 1 || p.UpdatedFields[0] != "firstName" || *p.FirstName != "Ann"):
			t.Errorf("relayed contact.updated of a: %s", env.Payload)
		}
	}
	for id, typ := range want {
		if seen[id] != 1 {
			t.Errorf("%s %s published %d times, want exactly once", typ, id, seen[id])
		}
	}
}
