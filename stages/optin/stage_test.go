package optin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
	"sendstream/ingest/transactional"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/stages/optin"
)

// newWorkspace creates a workspace in Postgres and returns its id.
func newWorkspace(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	ws, _, err := auth.NewStore(pool).CreateWorkspace(context.Background(), auth.NewWorkspace{Name: "optin " + schemas.NewID()[20:]})
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func optInEnv(t *testing.T, ws string, p schemas.OptInRequestedPayload) schemas.Envelope {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return schemas.Envelope{ID: schemas.NewID(), Workspace: ws, Type: schemas.TypeOptInRequested, Key: ws + ":c1",
		OccurredAt: time.Now().UTC().Truncate(time.Millisecond), Payload: b}
}

var good = schemas.OptInRequestedPayload{ContactID: "c1", Email: "a@example.com", FirstName: "Ann", ListID: "l1", ListName: "News",
	ConfirmURL: "http://x/confirm?token=t", ExpiresAt: time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)}

// handle runs Handle and returns its one output and the output's payload.
func handle(t *testing.T, s *optin.Stage, env schemas.Envelope) (schemas.Envelope, schemas.SendPayload) {
	t.Helper()
	out, err := s.Handle(context.Background(), env)
	if err != nil || len(out) != 1 {
		t.Fatalf("Handle: %v, %d envelopes", err, len(out))
	}
	p, err := schemas.DecodeSendPayload(out[0].Payload)
	if err != nil {
		t.Fatalf("send payload: %v", err)
	}
	return out[0], p
}

// TestHandleReturnsOneStoredSendPerEnvelope: an opt-in request becomes one
// queued transactional message of the workspace and its send envelope
// (returned, not published); a replay returns the same envelope and stores
// nothing new; other types are skipped.
func TestHandleReturnsOneStoredSendPerEnvelope(t *testing.T) {
	pool := stack.PG(t)
	ws := newWorkspace(t, pool)
	s := optin.New(pool)
	ctx := context.Background()
	if out, err := s.Handle(ctx, schemas.Envelope{ID: "x", Workspace: ws, Type: schemas.TypeContactCreated, Payload: []byte(`{}`)}); err != nil || out != nil {
		t.Fatalf("other type: %v, %v", out, err)
	}
	env := optInEnv(t, ws, good)
	out, p := handle(t, s, env)
	again, _ := handle(t, s, env)
	if out.ID != again.ID || !bytes.Equal(out.Payload, again.Payload) || out.Key != again.Key {
		t.Fatalf("a replay returned another envelope:\n%+v\n%+v", out, again)
	}
	if out.ID != schemas.ChildID(env.ID, schemas.TypeTransactionalSend, 0) || out.Type != schemas.TypeTransactionalSend ||
		out.Workspace != ws || out.Key != ws+":"+out.ID || out.CausationID != env.ID || !out.OccurredAt.Equal(env.OccurredAt) {
		t.Errorf("envelope: %+v", out)
	}
	if p.MessageID != out.ID || p.To != good.Email || p.Contact == nil || p.Contact.ID != "c1" || p.TemplateID != "" ||
		p.Subject != optin.Subject || p.HTML != optin.HTML || p.Text != optin.Text {
		t.Errorf("payload: %+v", p)
	}
	var data map[string]string
	if err := json.Unmarshal(p.Data, &data); err != nil || data["confirmUrl"] != good.ConfirmURL || data["listName"] != "News" ||
		data["greeting"] != "Hello Ann," || data["expiresAt"] != "2 January 2030 03:04 UTC" {
		t.Errorf("data %s: %v", p.Data, err)
	}
	var n int
	var status, contact string
	if err := pool.QueryRow(ctx, "SELECT count(*), min(status), min(contact_id) FROM transactional_messages WHERE id = $1 AND workspace_id = $2",
		out.ID, ws).Scan(&n, &status, &contact); err != nil || n != 1 || status != schemas.MessageQueued || contact != "c1" {
		t.Fatalf("stored: %d rows, status %q, contact %q, %v", n, status, contact, err)
	}
}

// TestSenderIsTheTransactionalDefault: the sender is the one a send without
// fromEmail gets: the default policy's, else noreply@ the first domain,
// else noreply@sendstream.local; the policy is the stored default one, else
// the built-in one.
func TestSenderIsTheTransactionalDefault(t *testing.T) {
	pool := stack.PG(t)
	ws := newWorkspace(t, pool)
	s := optin.New(pool)
	ctx := context.Background()
	tx := transactional.NewStore(pool)

	_, p := handle(t, s, optInEnv(t, ws, good))
	builtin := transactional.BuiltinPolicy(ws)
	if p.From.Email != "noreply@sendstream.local" || p.Policy.ID != builtin.ID || p.Policy.Kind != schemas.PolicyTransactional ||
		p.Policy.Provider != "smtp" || p.RFCMessageID != p.MessageID+"@sendstream.local" {
		t.Errorf("no domain, no policy: from %+v policy %+v rfc %s", p.From, p.Policy, p.RFCMessageID)
	}
	for _, d := range []string{"first.test", "second.test"} {
		if _, err := tx.AddDomain(ctx, ws, transactional.Domain{Domain: d, Selector: "s1"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // created_at orders the domains
	}
	if _, p = handle(t, s, optInEnv(t, ws, good)); p.From.Email != "noreply@first.test" || p.RFCMessageID != p.MessageID+"@first.test" {
		t.Errorf("with domains: from %+v rfc %s", p.From, p.RFCMessageID)
	}
	id, err := tx.CreatePolicy(ctx, ws, transactional.Policy{Key: transactional.DefaultPolicyKey, Kind: schemas.PolicyTransactional,
		FromEmail: "hi@second.test", FromName: "Second"})
	if err != nil {
		t.Fatal(err)
	}
	if _, p = handle(t, s, optInEnv(t, ws, good)); p.From.Email != "hi@second.test" || p.From.Name != "Second" || p.Policy.ID != id {
		t.Errorf("with a policy: from %+v policy %+v", p.From, p.Policy)
	}
}

// TestHandleErrorsArePermanentOnlyWhenRetryCannotHelp: a malformed payload
// is permanent; a workspace that is gone gets nothing; Postgres failing is
// retried.
func TestHandleErrorsArePermanentOnlyWhenRetryCannotHelp(t *testing.T) {
	pool := stack.PG(t)
	ctx := context.Background()
	s := optin.New(pool)
	for _, payload := range []string{`[]`, `{"email":"a@example.com"}`, `{"confirmUrl":"http://x"}`} {
		if _, err := s.Handle(ctx, schemas.Envelope{ID: "b", Workspace: "w", Type: schemas.TypeOptInRequested, Payload: []byte(payload)}); !pipeline.IsPermanent(err) {
			t.Errorf("payload %s: %v, want permanent", payload, err)
		}
	}
	gone := optInEnv(t, "no-such-workspace-"+schemas.NewID(), good)
	if out, err := s.Handle(ctx, gone); err != nil || out != nil {
		t.Errorf("workspace gone: %v, %v", out, err)
	}
	closed, err := pgxpool.New(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	if _, err := optin.New(closed).Handle(ctx, optInEnv(t, newWorkspace(t, pool), good)); err == nil || pipeline.IsPermanent(err) {
		t.Errorf("Postgres unavailable: %v, want a retryable error", err)
	}
}
