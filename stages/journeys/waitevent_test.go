package journeys_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"sendstream/schemas"
	"sendstream/stages/journeymatch"
)

// waitForPaid waits up to an hour for order.paid: onEvent sends, onTimeout
// exits; a last step sends again after either arm that goes on.
const waitForPaid = `{"name":"WFE","status":"active","reentry":"always","trigger":{"type":"api_event"},
	"steps":[{"type":"wait_for_event","event":"order.paid","timeout":"1h",
	          "onEvent":[{"type":"send_email","templateId":"TPL"}],"onTimeout":[{"type":"exit"}]}]}`

// started returns the execution and contact ids of a started envelope.
func started(t *testing.T, env schemas.Envelope) (exec, contact string) {
	t.Helper()
	var p schemas.JourneyExecutionStarted
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.ExecutionID, p.ContactID
}

// matched is the goals stage's hand-off of a recorded event of contact,
// received at received, from source.
func (f *fixture) matched(t *testing.T, contact, event, source string, received time.Time) schemas.Envelope {
	t.Helper()
	b, err := json.Marshal(schemas.EventPayload{Event: event, ContactID: contact, Source: source, OccurredAt: received,
		ReceivedAt: received, Properties: json.RawMessage(`{"total":12}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := schemas.NewID()
	return schemas.Envelope{ID: schemas.ChildID(id, schemas.TypeEventMatched, 0), Workspace: f.ws, Type: schemas.TypeEventMatched,
		Key: f.ws + ":" + contact, OccurredAt: received, CausationID: id, Payload: b}
}

// match hands env to the real matching stage and returns its event
// wake-ups (for the engine, on the journeys topic).
func match(t *testing.T, m *journeymatch.Stage, env schemas.Envelope) []schemas.Envelope {
	t.Helper()
	out, err := m.Handle(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	var wakes []schemas.Envelope
	for _, o := range out {
		if o.Type == schemas.TypeJourneyEventWake {
			if journeymatch.Route(o) != schemas.TopicJourneys {
				t.Errorf("event wake-up routed to %s", journeymatch.Route(o))
			}
			wakes = append(wakes, o)
		}
	}
	return wakes
}

// TestWaitForEvent runs wait_for_event through the real matching stage and
// engine on Postgres: the event for the waiting contact wakes the
// execution at once and takes onEvent; an event of another name, of
// another contact or from /public/events wakes nothing; a redelivered
// event or wake-up does nothing twice; the timer after the event does
// nothing. Without the event the timer takes onTimeout, and the event
// afterwards wakes nothing; an event received after the wait's end does
// nothing even when its wake-up is handled before the timer.
func TestWaitForEvent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	m := journeymatch.New(f.pg, f.store)
	j := f.journey(t, waitForPaid)
	t0 := f.clock.now()

	paid := f.start(t, j, `{}`)
	exec, contact := started(t, paid)
	f.handle(t, paid)
	timer, due := f.sched.last(t)
	if !due.Equal(t0.Add(time.Hour)) {
		t.Fatalf("timeout at %s, want %s", due, t0.Add(time.Hour))
	}
	var waitEvent *string
	if err := f.pg.QueryRow(ctx, `SELECT wait_event FROM journey_executions WHERE id = $1`, exec).Scan(&waitEvent); err != nil ||
		waitEvent == nil || *waitEvent != "order.paid" {
		t.Fatalf("wait_event %v (%v), want order.paid", waitEvent, err)
	}
	other := f.start(t, j, `{}`) // another contact, waiting too
	_, otherContact := started(t, other)
	f.handle(t, other)

	at := t0.Add(10 * time.Minute)
	for _, e := range []schemas.Envelope{
		f.matched(t, contact, "order.refunded", schemas.EventSourceAPI, at),
		f.matched(t, contact, "order.paid", schemas.EventSourcePublic, at),
	} {
		if w := match(t, m, e); len(w) != 0 {
			t.Fatalf("an event of another name or from /public/events woke %d executions", len(w))
		}
	}
	ev := f.matched(t, contact, "order.paid", schemas.EventSourceImport, at)
	wakes := match(t, m, ev)
	if len(wakes) != 1 {
		t.Fatalf("%d wake-ups, want 1 (only %s's execution waits for it)", len(wakes), contact)
	}
	if again := match(t, m, ev); len(again) != 1 || again[0].ID != wakes[0].ID {
		t.Fatalf("redelivered event: wake-ups %v, want the same one", again)
	}
	f.clock.set(at)
	out := f.handle(t, wakes[0])
	if got := strings.Join(steps(t, out), " "); got != "0:event: 0.onEvent.0:sent:completed" {
		t.Fatalf("event: steps %q", got)
	}
	if len(out) != 3 || out[1].Type != schemas.TypeTransactionalSend {
		t.Errorf("onEvent's send envelope missing: %d outputs", len(out))
	}
	// Redelivered wake-up: the same outputs, nothing run again.
	again := f.handle(t, wakes[0])
	if strings.Join(steps(t, again), " ") != strings.Join(steps(t, out), " ") {
		t.Errorf("redelivered wake-up: %v", steps(t, again))
	}
	// The timer, late: the wait has ended.
	f.clock.set(due)
	if out := f.handle(t, timer); len(out) != 0 {
		t.Errorf("the timer after the event ran %v", steps(t, out))
	}
	if st, _, waiting := f.state(t, paid); st != "completed" || waiting {
		t.Errorf("after the event: %s waiting=%v", st, waiting)
	}
	var runs int
	if err := f.pg.QueryRow(ctx, `SELECT count(*) FROM journey_step_runs WHERE execution_id = $1`, exec).Scan(&runs); err != nil || runs != 2 {
		t.Errorf("%d step runs (%v), want 2", runs, err)
	}
	if n := len(f.mail.keys); n != 2 || f.mail.keys[0] != f.mail.keys[1] {
		t.Errorf("mail keys %v, want one key (the send and its replay)", f.mail.keys)
	}
	// The other contact still waits: its timer takes onTimeout.
	if st, pos, waiting := f.state(t, other); st != "active" || pos != "0" || !waiting {
		t.Fatalf("the other contact's execution: %s %s waiting=%v", st, pos, waiting)
	}
	otherTimer := f.timerOf(t, other)
	out = f.handle(t, otherTimer)
	if got := strings.Join(steps(t, out), " "); got != "0:timeout: 0.onTimeout.0:exited:exited" {
		t.Fatalf("timeout: steps %q", got)
	}
	// Its event after the timeout wakes nothing.
	if w := match(t, m, f.matched(t, otherContact, "order.paid", schemas.EventSourceAPI, due.Add(time.Minute))); len(w) != 0 {
		t.Errorf("an event after the timeout woke %d executions", len(w))
	}

	// Received after the wait's end, its wake-up handled before the
	// timer's: nothing; the timer then takes onTimeout.
	late := f.start(t, j, `{}`)
	_, lateContact := started(t, late)
	f.clock.set(t0.Add(2 * time.Hour))
	f.handle(t, late)
	lateTimer, lateDue := f.sched.last(t)
	w := match(t, m, f.matched(t, lateContact, "order.paid", schemas.EventSourceAPI, lateDue.Add(time.Second)))
	if len(w) != 1 {
		t.Fatalf("%d wake-ups for the late event, want 1 (the execution still waits)", len(w))
	}
	f.clock.set(lateDue.Add(2 * time.Second))
	if out := f.handle(t, w[0]); len(out) != 0 {
		t.Fatalf("an event received after the timeout ran %v", steps(t, out))
	}
	if got := strings.Join(steps(t, f.handle(t, lateTimer)), " "); got != "0:timeout: 0.onTimeout.0:exited:exited" {
		t.Fatalf("timeout after the late event: %q", got)
	}
}

// timerOf returns the last timer scheduled for the execution of started.
func (f *fixture) timerOf(t *testing.T, started schemas.Envelope) schemas.Envelope {
	t.Helper()
	var p schemas.JourneyExecutionStarted
	_ = json.Unmarshal(started.Payload, &p)
	f.sched.mu.Lock()
	defer f.sched.mu.Unlock()
	for i := len(f.sched.envs) - 1; i >= 0; i-- {
		var w schemas.JourneyWake
		if json.Unmarshal(f.sched.envs[i].Payload, &w) == nil && w.ExecutionID == p.ExecutionID {
			f.clock.set(f.sched.at[i])
			return f.sched.envs[i]
		}
	}
	t.Fatalf("no timer for %s", p.ExecutionID)
	return schemas.Envelope{}
}
