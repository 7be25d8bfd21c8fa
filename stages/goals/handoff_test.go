package goals_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
	"sendstream/ingest/contacts"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/webhook"
	"sendstream/stages/goals"
)

// draftJourney gives ws a draft journey: a journey that is not archived,
// so goals hands ws's matched events to journey matching.
func draftJourney(t *testing.T, pg *pgxpool.Pool, ws string) {
	t.Helper()
	_, err := pg.Exec(context.Background(), `INSERT INTO journeys (id, workspace_id, name, status, trigger_type, reentry,
		current_version, created_at, updated_at) VALUES ($1, $2, 'goals test', 'draft', 'api_event', 'always', 1, now(), now())`,
		schemas.NewID(), ws)
	if err != nil {
		t.Fatalf("draft journey: %v", err)
	}
}

// types lists the types of outs.
func types(outs []schemas.Envelope) []string {
	var ts []string
	for _, o := range outs {
		ts = append(ts, o.Type)
	}
	return ts
}

// TestHandOffOnlyWhereJourneysAre: a matched event of a workspace without
// journeys gets its webhooks but no journey hand-off; once the workspace
// has a journey (not archived), the hand-off comes within the lookup's
// cache time (webhook.TargetTTL), and an archived journey counts as none.
func TestHandOffOnlyWhereJourneysAre(t *testing.T) {
	pg := stack.PG(t)
	ctx := context.Background()
	ws, _, err := auth.NewStore(pg).CreateWorkspace(ctx, auth.NewWorkspace{Name: "handoff", Plan: "pro"})
	if err != nil {
		t.Fatal(err)
	}
	cs := contacts.NewStore(pg)
	defer cs.Close()
	ann, err := cs.Upsert(ctx, ws, contacts.UpsertInput{Email: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := goals.New(ctx, pipeline.Resources{Postgres: pg}, goals.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	handle := func() []string {
		t.Helper()
		o, err := st.Handle(ctx, env(t, ws, schemas.NewID(),
			schemas.EventPayload{Event: "order", ContactID: ann.Contact.ID, GoalType: "purchase", Value: "5", OccurredAt: time.Now()}))
		if err != nil {
			t.Fatal(err)
		}
		return types(o)
	}
	if got := handle(); len(got) != 2 || got[0] != schemas.TypeWebhookEventRecorded || got[1] != schemas.TypeWebhookGoalRecorded {
		t.Fatalf("no journeys: outputs %v, want EVENT_RECORDED and GOAL_RECORDED only", got)
	}

	draftJourney(t, pg, ws)
	deadline := time.Now().Add(webhook.TargetTTL + 5*time.Second)
	for {
		got := handle()
		if len(got) == 3 && got[1] == schemas.TypeEventMatched {
			break
		}
		if len(got) != 2 || time.Now().After(deadline) {
			t.Fatalf("with a journey: outputs %v, want the hand-off within the cache time", got)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if _, err := pg.Exec(ctx, `UPDATE journeys SET status = 'archived' WHERE workspace_id = $1`, ws); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(webhook.TargetTTL + 5*time.Second)
	for {
		got := handle()
		if len(got) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journey archived: outputs %v, want no hand-off after the cache time", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
