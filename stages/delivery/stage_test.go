package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
	"sendstream/ingest/ingesttest"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/email/smtptest"
)

// TestHandleSendsOnceAndAnswersRedeliveriesAlike drives Handle against
// Postgres and a test SMTP server: a send is claimed, handed off once and
// answered with its status and TRANSACTIONAL_SENT envelopes; the same
// envelope again (a redelivery after a crash before the runner published)
// sends nothing and returns the same envelopes. A message whose relay
// answer is lost fails as outcome unknown, answered with its status and
// TRANSACTIONAL_FAILED (the same ids again on a redelivery), and is never
// handed off again.
func TestHandleSendsOnceAndAnswersRedeliveriesAlike(t *testing.T) {
	pg := stack.PG(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, _, err := auth.NewStore(pg).CreateWorkspace(ctx, auth.NewWorkspace{Name: "delivery stage " + schemas.NewID()[20:], Plan: "pro"})
	if err != nil {
		t.Fatal(err)
	}
	var lost atomic.Int32
	server := smtptest.Start(t, smtptest.Options{Data: func(m smtptest.Message) error {
		if strings.HasPrefix(m.To[0], "lost@") {
			lost.Add(1)
			return smtptest.DropConnection
		}
		return nil
	}})
	for _, ev := range []string{"TRANSACTIONAL_SENT", "TRANSACTIONAL_FAILED"} {
		ingesttest.Subscribe(t, pg, ws, ev, "https://hooks.example.com/in")
	}
	s := smtpStage(ctx, t, pg, server.Addr)
	sendSubject := func(to, subject string) schemas.Envelope { return sendEnvelope(t, ws, to, subject) }
	send := func(to string) schemas.Envelope { return sendSubject(to, "Hello {{ n }}") }

	env := send("once@example.test")
	first, err := s.Handle(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || first[0].Type != schemas.TypeTransactionalStatus || first[1].Type != schemas.TypeWebhookTransactionalSent ||
		route(first[0]) != schemas.TopicMessageStatus || route(first[1]) != schemas.TopicWebhooks {
		t.Fatalf("outputs %+v, want a status for TopicMessageStatus and TRANSACTIONAL_SENT", first)
	}
	if st, _ := schemas.DecodeStatusPayload(first[0].Payload); st.Status != schemas.MessageSent || st.MessageID != env.ID {
		t.Errorf("status payload %s", first[0].Payload)
	}
	again, err := s.Handle(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 2 {
		t.Fatalf("redelivery: %d outputs, want the same 2", len(again))
	}
	for i := range again {
		if again[i].ID != first[i].ID || !bytes.Equal(again[i].Payload, first[i].Payload) {
			t.Errorf("redelivery output %d: %s %s, want %s %s", i, again[i].ID, again[i].Payload, first[i].ID, first[i].Payload)
		}
	}
	if n := len(server.Messages()); n != 1 {
		t.Errorf("%d messages at the server, want 1", n)
	}
	subject := func(id string) string {
		t.Helper()
		var s *string
		if err := pg.QueryRow(ctx, "SELECT subject FROM transactional_messages WHERE id = $1", id).Scan(&s); err != nil || s == nil {
			t.Fatalf("subject of %s: %v, %v", id, s, err)
		}
		return *s
	}
	if got := subject(env.ID); got != "Hello 1" {
		t.Errorf("stored subject %q, want it as rendered: \"Hello 1\"", got)
	}
	// A subject that renders empty is stored empty: rendered, not missing.
	empty := sendSubject("empty@example.test", "{{ absent }}")
	if _, err := s.Handle(ctx, empty); err != nil {
		t.Fatal(err)
	}
	if got := subject(empty.ID); got != "" {
		t.Errorf("stored subject %q, want the empty rendering", got)
	}

	env = send("lost@example.test")
	outs, err := s.Handle(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 || outs[1].Type != schemas.TypeWebhookTransactionalFailed || route(outs[1]) != schemas.TopicWebhooks ||
		outs[1].ID != schemas.ChildID(env.ID, schemas.TypeWebhookTransactionalFailed, 0) || outs[1].Key != ws+":"+env.ID {
		t.Fatalf("lost answer: outputs %+v, want a failed status and TRANSACTIONAL_FAILED", outs)
	}
	st, _ := schemas.DecodeStatusPayload(outs[0].Payload)
	if st.Status != schemas.MessageFailed || !strings.Contains(st.Detail, "outcome unknown") {
		t.Errorf("lost answer: %+v, want failed as outcome unknown", st)
	}
	var fd schemas.TransactionalFailedData
	if err := json.Unmarshal(outs[1].Payload, &fd); err != nil || fd.MessageID != env.ID || fd.Email != "lost@example.test" ||
		fd.Provider != "smtp" || fd.RFCMessageID != env.ID+"@stage.test" || fd.Reason != st.Detail || fd.OccurredAt.IsZero() {
		t.Errorf("TRANSACTIONAL_FAILED data %s: %v", outs[1].Payload, err)
	}
	// A redelivery returns the same envelopes (same ids): receivers see
	// TRANSACTIONAL_FAILED once.
	again, err = s.Handle(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 2 || again[0].ID != outs[0].ID || again[1].ID != outs[1].ID || !bytes.Equal(again[1].Payload, outs[1].Payload) {
		t.Errorf("redelivery of the failed message: %+v, want %+v", again, outs)
	}
	if n := lost.Load(); n != 1 {
		t.Errorf("the message whose answer was lost was transmitted %d times, want 1", n)
	}
	if got := subject(env.ID); got != "Hello 1" {
		t.Errorf("stored subject of the transmitted message whose answer was lost: %q, want \"Hello 1\"", got)
	}
}

// sendEnvelope is a transactional.send.v1 envelope of ws to one address
// whose message has no row yet (Handle restores it from the envelope).
func sendEnvelope(t *testing.T, ws, to, subject string) schemas.Envelope {
	t.Helper()
	id := schemas.NewID()
	p := schemas.SendPayload{MessageID: id, RFCMessageID: id + "@stage.test", To: to, From: schemas.Address{Email: "noreply@stage.test"},
		Policy:  schemas.PolicyRef{ID: "p", Key: "transactional", Kind: schemas.PolicyTransactional, Provider: "smtp"},
		Subject: subject, HTML: "<p>{{ n }}</p>", Data: json.RawMessage(`{"n":1}`), AcceptedAt: time.Now().UTC()}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return schemas.Envelope{ID: id, Workspace: ws, Type: schemas.TypeTransactionalSend, Key: ws + ":" + id, OccurredAt: p.AcceptedAt, Payload: b}
}

// smtpStage is the stage on pg, sending through the SMTP server at addr
// without TLS; it is closed when the test ends.
func smtpStage(ctx context.Context, t *testing.T, pg *pgxpool.Pool, addr string) *Stage {
	t.Helper()
	cfg := DefaultConfig().FromSettings(map[string]string{"secret": "s", "smtp_url": "smtp://" + addr + "?tls=none"})
	s, err := New(ctx, pipeline.Resources{Postgres: pg}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
