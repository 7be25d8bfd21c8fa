package journeys_test

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
	engine "sendstream/stages/journeys"
)

// TestWaitForEventThroughBroker runs the goals stage, matching and the
// engine (with its River timers) in the real runner on an in-process
// broker and the stack's Postgres. Contact A starts a journey waiting up
// to an hour for order.paid: another event name changes nothing, then
// order.paid, published twice (a redelivery), ends the wait at once on
// onEvent (exit), one step run each. Contact B starts a journey waiting
// two seconds: its timer takes onTimeout (the execution completes), and
// order.paid afterwards changes nothing.
func TestWaitForEventThroughBroker(t *testing.T) {
	pg := stack.PG(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws, a := ingesttest.WorkspaceWithContact(ctx, t, pg, "wait for event", "a@example.com")
	b := schemas.NewID()
	if _, err := pg.Exec(ctx, `INSERT INTO contacts (id, workspace_id, seq, email, status) VALUES ($1, $2, nextval('contacts_seq'), 'b@example.com', 'ACTIVE')`, b, ws); err != nil {
		t.Fatal(err)
	}
	store := journeys.NewStore(pg, nil)
	create := func(trigger, timeout string) string {
		d, err := schemas.ParseJourney([]byte(`{"name":"` + trigger + `","status":"active","reentry":"once",
			"trigger":{"type":"event","event":"` + trigger + `"},
			"steps":[{"type":"wait_for_event","event":"order.paid","timeout":"` + timeout + `","onEvent":[{"type":"exit"}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		j, _, err := store.Create(ctx, ws, d)
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	long, short := create("cart.abandoned", "1h"), create("trial.started", "2s")

	prefix := stack.TopicPrefix(t)
	brokers := pipelinetest.Cluster(t, prefix)
	prod := pipelinetest.Producer(ctx, t, brokers, prefix)
	stop := pipelinetest.RunStages(ctx, t, brokers, prefix, pipeline.Resources{Postgres: pg, Publisher: prod,
		Settings: map[string]string{"topic_prefix": prefix}}, goals.Name, journeymatch.Name, engine.Name)
	defer stop()

	publish := func(contact, email, event string) schemas.Envelope {
		t.Helper()
		at := time.Now().UTC().Truncate(time.Millisecond)
		p, err := json.Marshal(schemas.EventPayload{Event: event, ContactID: contact, Email: email, OccurredAt: at, ReceivedAt: at,
			Source: schemas.EventSourceAPI})
		if err != nil {
			t.Fatal(err)
		}
		env := schemas.Envelope{ID: schemas.NewID(), Workspace: ws, Type: schemas.TypeEventRecorded, Key: ws + ":" + contact,
			OccurredAt: at, Payload: p}
		if err := prod.Publish(ctx, schemas.TopicEvents, env); err != nil {
			t.Fatal(err)
		}
		return env
	}
	// state waits until the contact's execution of journey j has the
	// state and position want ("state@position", waiting or not).
	state := func(j, contact, want string) {
		t.Helper()
		var got string
		for ctx.Err() == nil {
			err := pg.QueryRow(ctx, `SELECT state || '@' || position || coalesce(' waiting ' || wait_event, '')
				FROM journey_executions WHERE journey_id = $1 AND contact_id = $2`, j, contact).Scan(&got)
			if err == nil && got == want {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("execution of %s: %q, want %q", contact, got, want)
	}
	runs := func(j, contact string) (out []string) {
		t.Helper()
		rows, err := pg.Query(ctx, `SELECT r.address || ':' || r.outcome FROM journey_step_runs r JOIN journey_executions e ON e.id = r.execution_id
			WHERE e.journey_id = $1 AND e.contact_id = $2 ORDER BY r.seq`, j, contact)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}

	publish(a, "a@example.com", "cart.abandoned")
	publish(b, "b@example.com", "trial.started")
	state(long, a, "active@0 waiting order.paid")
	publish(a, "a@example.com", "order.refunded")
	paid := publish(a, "a@example.com", "order.paid")
	state(long, a, "exited@0.onEvent.0")
	if err := prod.Publish(ctx, schemas.TopicEvents, paid); err != nil { // redelivered
		t.Fatal(err)
	}
	state(short, b, "completed@0")
	publish(b, "b@example.com", "order.paid")
	time.Sleep(2 * time.Second) // the redelivery's and B's late event's handling run meanwhile
	if got := runs(long, a); len(got) != 2 || got[0] != "0:event" || got[1] != "0.onEvent.0:exited" {
		t.Errorf("A's steps %v, want [0:event 0.onEvent.0:exited]", got)
	}
	if got := runs(short, b); len(got) != 1 || got[0] != "0:timeout" {
		t.Errorf("B's steps %v, want [0:timeout]", got)
	}
	state(short, b, "completed@0")
}
