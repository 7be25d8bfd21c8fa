package journeys_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"sendstream/deploy/stack"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/stages/journeylog"
	engine "sendstream/stages/journeys"
)

// storingMailer stores each message as the transactional path does (a
// queued transactional_messages row under the id the key derives), then
// runs hook once (an archive committing meanwhile) or fails (the process
// dying before the step's transaction).
type storingMailer struct {
	f     *fixture
	mu    sync.Mutex
	keys  []string
	hook  func()
	fail  bool
	store bool
}

func (m *storingMailer) SendEmail(ctx context.Context, r schemas.MailRequest) (schemas.MailResult, error) {
	m.mu.Lock()
	m.keys = append(m.keys, r.ExternalID)
	hook, fail := m.hook, m.fail
	m.hook, m.fail = nil, false
	m.mu.Unlock()
	id := schemas.MessageIDOf(r.Workspace, r.ExternalID)
	if m.store {
		if _, err := m.f.pg.Exec(ctx, `INSERT INTO transactional_messages (id, workspace_id, external_id, to_email, rfc_message_id, policy_id)
			VALUES ($1, $2, $3, $4, $1, 'transactional') ON CONFLICT (id) DO NOTHING`, id, r.Workspace, r.ExternalID, r.To); err != nil {
			return schemas.MailResult{}, err
		}
	}
	if hook != nil {
		hook()
	}
	if fail {
		return schemas.MailResult{}, errors.New("died after storing the message")
	}
	return schemas.MailResult{MessageID: id, Status: schemas.MessageQueued,
		Publish: []schemas.Envelope{{ID: id, Workspace: r.Workspace, Type: schemas.TypeTransactionalSend, Key: r.Workspace + ":" + id, Payload: []byte(`{}`)}}}, nil
}

func (m *storingMailer) calls() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.keys) }

// sends are the transactional send envelopes of out.
func sends(out []schemas.Envelope) []string {
	var ids []string
	for _, e := range out {
		if e.Type == schemas.TypeTransactionalSend {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// TestArchiveWhileSendingLeavesNoMessageUnpublished: a journey archived
// after the engine read an execution at a send_email step and before it
// locked it (here: while the Mailer stores the message) used to drop the
// stored message's envelope, leaving the message queued and never
// published. Now the envelope comes out with the step unrecorded. The same
// when the process dies after storing the message and the archive
// commits before the redelivery: the redelivery, and the execution's
// cancellation, publish the stored message again; an execution archived
// before its send stored anything publishes nothing and sends nothing.
func TestArchiveWhileSendingLeavesNoMessageUnpublished(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	scope := "test-" + schemas.NewID()
	f.store.SetOutboxScope(scope)
	t.Cleanup(func() { _, _ = f.pg.Exec(context.Background(), `DELETE FROM contact_outbox WHERE scope = $1`, scope) })
	m := &storingMailer{f: f, store: true}
	stage := engine.New(engine.Options{Store: f.store, Postgres: f.pg, Timers: f.sched, Mailer: m, Now: f.clock.now})
	handle := func(env schemas.Envelope) []schemas.Envelope {
		t.Helper()
		out, err := stage.Handle(ctx, env)
		if err != nil {
			t.Fatalf("handle %s: %v", env.Type, err)
		}
		return out
	}
	archive := func(j string) {
		if _, err := f.store.SetStatus(ctx, f.ws, j, schemas.JourneyArchived); err != nil {
			t.Error(err)
		}
	}
	const sendFirst = `{"name":"A","status":"active","reentry":"always","trigger":{"type":"api_event"},
		"steps":[{"type":"send_email","templateId":"TPL"},{"type":"send_email","templateId":"TPL"}]}`

	// Archived while the Mailer stores the message.
	j1 := f.journey(t, sendFirst)
	s1 := f.start(t, j1, `{}`)
	exec1, _ := started(t, s1)
	m.hook = func() { archive(j1) }
	out := handle(s1)
	want := schemas.MessageIDOf(f.ws, schemas.JourneySendExternalID(exec1, "0"))
	if got := sends(out); len(got) != 1 || got[0] != want || len(steps(t, out)) != 0 {
		t.Fatalf("archived mid-send: sends %v steps %v, want the stored message %s published and no step recorded", got, steps(t, out), want)
	}
	if st, pos, _ := f.state(t, s1); st != "cancelled" || pos != "0" {
		t.Fatalf("archived mid-send: %s at %s, want cancelled at 0", st, pos)
	}

	// The process dies after storing; the archive commits; the
	// redelivery and the cancellation publish the stored message.
	j2 := f.journey(t, sendFirst)
	s2 := f.start(t, j2, `{}`)
	exec2, _ := started(t, s2)
	waiting := f.start(t, j2, `{}`) // archived before its send ran
	m.fail = true
	if _, err := stage.Handle(ctx, s2); err == nil {
		t.Fatal("Handle succeeded although the Mailer failed")
	}
	archive(j2)
	n := m.calls()
	want2 := schemas.MessageIDOf(f.ws, schemas.JourneySendExternalID(exec2, "0"))
	if got := sends(handle(s2)); len(got) != 1 || got[0] != want2 {
		t.Fatalf("redelivery after the archive: sends %v, want %s", got, want2)
	}
	if out := handle(waiting); len(out) != 0 || m.calls() != n+1 {
		t.Fatalf("an execution archived before its send: outputs %v, %d Mailer calls, want none", out, m.calls()-n-1)
	}

	// Archiving wrote one cancellation per execution into the outbox
	// (scope: this Store's), for the relay to publish on the journeys
	// topic; the engine's handling of one republishes what is left.
	rows, err := f.pg.Query(ctx, `SELECT data->>'topic', data->>'envelope' FROM contact_outbox WHERE scope = $1 ORDER BY id`, scope)
	if err != nil {
		t.Fatal(err)
	}
	cancelled := map[string]schemas.Envelope{}
	for rows.Next() {
		var topic, raw string
		if err := rows.Scan(&topic, &raw); err != nil {
			t.Fatal(err)
		}
		var env schemas.Envelope
		if err := schemas.DecodeEnvelope([]byte(raw), &env); err != nil || topic != schemas.TopicJourneys ||
			env.Type != schemas.TypeJourneyExecutionCancelled {
			t.Fatalf("outbox row %s %s: %v", topic, raw, err)
		}
		var p struct{ ExecutionID string }
		_ = json.Unmarshal(env.Payload, &p)
		cancelled[p.ExecutionID] = env
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	waitingExec, _ := started(t, waiting)
	if len(cancelled) != 3 || cancelled[exec1].ID == "" || cancelled[exec2].ID == "" || cancelled[waitingExec].ID == "" {
		t.Fatalf("cancellations in the outbox: %d, want the 3 executions'", len(cancelled))
	}
	if got := sends(handle(cancelled[exec2])); len(got) != 1 || got[0] != want2 {
		t.Errorf("the cancellation of the execution with a stored message: sends %v", got)
	}
	if out := handle(cancelled[waitingExec]); len(out) != 0 {
		t.Errorf("the cancellation of an execution without a message: %v", out)
	}

	// They reach ClickHouse journey_events as 'cancelled' rows, once.
	ch := stack.CH(t)
	log, err := journeylog.New(ctx, pipeline.Resources{ClickHouse: ch}, journeylog.NameStarted, journeylog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for _, env := range cancelled {
			if _, err := log.Handle(ctx, env); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	r2, err := ch.Query(ctx, `SELECT execution_id, step, final FROM journey_events WHERE workspace = ? AND event = 'cancelled' ORDER BY execution_id`, f.ws)
	if err != nil {
		t.Fatal(err)
	}
	for r2.Next() {
		var e, step, final string
		if err := r2.Scan(&e, &step, &final); err != nil {
			t.Fatal(err)
		}
		got = append(got, e+"@"+step+":"+final)
	}
	if len(got) != 3 || !strings.HasSuffix(got[0], "@0:cancelled") {
		t.Errorf("journey_events cancelled rows %v, want 3 at step 0", got)
	}
}
