package webhookdelivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
	"sendstream/stages/webhookdelivery"
)

// loopback lets the stage reach receivers on 127.0.0.0/8, as
// SENDSTREAM_WEBHOOK_ALLOW_PRIVATE does in local development.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// workspace creates a workspace and returns its id.
func workspace(t *testing.T, pg *pgxpool.Pool) string {
	t.Helper()
	ws := "ws_" + schemas.NewID()
	if _, err := pg.Exec(context.Background(), `INSERT INTO workspaces (id, name) VALUES ($1, 'webhook delivery test')`, ws); err != nil {
		t.Fatal(err)
	}
	return ws
}

// secretTargets is a fake endpoint store holding secrets, standing in for
// dashboard endpoints until their store lands in sinks/webhook.
type secretTargets struct {
	mu    sync.Mutex
	hooks map[string]webhook.Hook
}

func (f *secretTargets) Lookup(_ context.Context, _, id string) (webhook.Hook, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.hooks[id]
	return h, ok, nil
}

func (f *secretTargets) Retire(_ context.Context, _, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.hooks, id)
	return nil
}

// newStage returns the stage with REST hooks on pg, the fake endpoints
// and, when given, a scheduler of later attempts.
func newStage(t *testing.T, pg *pgxpool.Pool, cfg webhookdelivery.Config, endpoints *secretTargets, sched ...*webhookdelivery.Scheduler) *webhookdelivery.Stage {
	t.Helper()
	rest := webhook.NewRESTHooks(pg)
	targets := map[string]webhookdelivery.Targets{rest.Kind(): rest}
	if endpoints != nil {
		targets[schemas.WebhookTargetEndpoint] = endpoints
	}
	var sc *webhookdelivery.Scheduler
	if len(sched) > 0 {
		sc = sched[0]
	}
	return webhookdelivery.New(cfg, targets, sc)
}

// delivery returns a delivery envelope of attempt n to target.
func delivery(t *testing.T, ws, kind, targetID, url string, n int) schemas.Envelope {
	t.Helper()
	msg := schemas.NewID()
	body := []byte(`{"id":"` + msg + `","event":"CONTACT_CREATED","timestamp":"2026-11-26T10:00:00.000Z","teamId":"` + ws + `","data":{"contactId":"c1","email":"a@example.com"}}`)
	d := schemas.WebhookDelivery{MessageID: msg, Event: "CONTACT_CREATED", TargetKind: kind, TargetID: targetID, URL: url,
		Attempt: n, FirstAt: time.Now().UTC(), Body: body}
	p, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return schemas.Envelope{ID: schemas.ChildID(msg+"/"+targetID, schemas.TypeWebhookDelivery, n), Workspace: ws,
		Type: schemas.TypeWebhookDelivery, Key: ws + ":" + targetID, OccurredAt: time.Now().UTC(), Payload: p}
}

// attempts decodes the stage's outputs.
func attempts(t *testing.T, outs []schemas.Envelope) []schemas.WebhookAttempt {
	t.Helper()
	as := make([]schemas.WebhookAttempt, len(outs))
	for i, o := range outs {
		if o.Type != schemas.TypeWebhookAttempt {
			t.Fatalf("output %d has type %s", i, o.Type)
		}
		if err := json.Unmarshal(o.Payload, &as[i]); err != nil {
			t.Fatal(err)
		}
	}
	return as
}

// outcomes lists "attempt:outcome" of each attempt.
func outcomes(as []schemas.WebhookAttempt) []string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = fmt.Sprintf("%d:%s", a.Attempt, a.Outcome)
	}
	return s
}

func pgFor(t *testing.T) *pgxpool.Pool { return stack.PG(t) }
