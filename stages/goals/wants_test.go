package goals_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/ingest/ingesttest"
	"sendstream/pipeline"
	"sendstream/schemas"
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

// TestOutputsOnlyWhatTheWorkspaceWants: a matched goal event of a
// workspace with neither webhook targets nor journeys publishes nothing
// (its activity is still kept); each target added (an endpoint for
// EVENT_RECORDED, a journey, a REST hook for GOAL_RECORDED) adds its
// envelope within the lookup's cache time (webhook.TargetTTL), and an
// archived journey counts as none.
func TestOutputsOnlyWhatTheWorkspaceWants(t *testing.T) {
	pg := stack.PG(t)
	ctx := context.Background()
	ws, ann := ingesttest.WorkspaceWithContact(ctx, t, pg, "wants", "ann@example.com")
	st, err := goals.New(ctx, pipeline.Resources{Postgres: pg}, goals.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	handle := func() []string {
		t.Helper()
		o, err := st.Handle(ctx, env(t, ws, schemas.NewID(),
			schemas.EventPayload{Event: "order", ContactID: ann, GoalType: "purchase", Value: "5", OccurredAt: time.Now()}))
		if err != nil {
			t.Fatal(err)
		}
		return ingesttest.Types(o)
	}
	expect := func(what string, before, want []string) {
		t.Helper()
		ingesttest.AwaitOutputs(t, what, handle, before, want)
	}
	if got := handle(); len(got) != 0 {
		t.Fatalf("no targets: outputs %v, want none", got)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if a, _ := read(t, pg, ann); a.goals != 1 {
		t.Fatalf("no targets: goals counted %d, want 1 (the activity does not depend on targets)", a.goals)
	}

	er, gr, em := schemas.TypeWebhookEventRecorded, schemas.TypeWebhookGoalRecorded, schemas.TypeEventMatched
	ingesttest.Endpoint(t, pg, ws, "EVENT_RECORDED")
	expect("an endpoint for EVENT_RECORDED", nil, []string{er})
	draftJourney(t, pg, ws)
	expect("a journey", []string{er}, []string{er, em})
	ingesttest.Subscribe(t, pg, ws, "GOAL_RECORDED", "https://hooks.example.com/in")
	expect("a REST hook for GOAL_RECORDED", []string{er, em}, []string{er, em, gr})
	if _, err := pg.Exec(ctx, `UPDATE journeys SET status = 'archived' WHERE workspace_id = $1`, ws); err != nil {
		t.Fatal(err)
	}
	expect("the journey archived", []string{er, em, gr}, []string{er, gr})
}
