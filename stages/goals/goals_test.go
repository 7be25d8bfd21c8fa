package goals_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/stages/goals"
)

func env(t *testing.T, ws, id string, p schemas.EventPayload) schemas.Envelope {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return schemas.Envelope{ID: id, Workspace: ws, Type: schemas.TypeEventRecorded, Key: ws + ":" + p.ContactID, OccurredAt: p.OccurredAt, Payload: b}
}

type activity struct {
	lastActivity, lastPurchase *time.Time
	goals, purchases, refunds  int64
	ltv                        string
}

func read(t *testing.T, pg *pgxpool.Pool, contact string) (activity, bool) {
	t.Helper()
	var a activity
	err := pg.QueryRow(context.Background(), `SELECT last_activity_at, last_purchase_at, goals, purchase_count, refund_count, lifetime_value::text
		FROM contact_activity WHERE contact_id = $1`, contact).Scan(&a.lastActivity, &a.lastPurchase, &a.goals, &a.purchases, &a.refunds, &a.ltv)
	if err != nil {
		return a, false
	}
	return a, true
}

func TestGoalsCountedOnceWithRefundsAndActivity(t *testing.T) {
	pg := stack.PG(t)
	ctx := context.Background()
	ws, _, err := auth.NewStore(pg).CreateWorkspace(ctx, auth.NewWorkspace{Name: "goals", Plan: "pro"})
	if err != nil {
		t.Fatal(err)
	}
	cs := contacts.NewStore(pg)
	defer cs.Close()
	ann, err := cs.Upsert(ctx, ws, contacts.UpsertInput{Email: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := cs.Upsert(ctx, ws, contacts.UpsertInput{Email: "bob@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	a, b := ann.Contact.ID, bob.Contact.ID
	// Targets for every output: a journey, and webhooks for both events.
	draftJourney(t, pg, ws)
	for _, ev := range []string{"EVENT_RECORDED", "GOAL_RECORDED"} {
		ingesttest.Subscribe(t, pg, ws, ev, "https://hooks.example.com/in")
	}
	st, err := goals.New(ctx, pipeline.Resources{Postgres: pg}, goals.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	id := func(s string) string { return ws + "-" + s }
	evs := []schemas.Envelope{
		env(t, ws, id("p1"), schemas.EventPayload{Event: "order", ContactID: a, GoalType: "purchase", Value: "100.25", OccurredAt: t0}),
		env(t, ws, id("p2"), schemas.EventPayload{Event: "order", ContactID: a, GoalType: "purchase", Value: "50", OccurredAt: t0.Add(2 * time.Hour)}),
		env(t, ws, id("r1"), schemas.EventPayload{Event: "refund", ContactID: a, GoalType: "purchase", Value: "-30.25", OccurredAt: t0.Add(3 * time.Hour)}),
		env(t, ws, id("s1"), schemas.EventPayload{Event: "sub", ContactID: a, GoalType: "subscription", Value: "9.99", OccurredAt: t0.Add(time.Hour)}),
		env(t, ws, id("l1"), schemas.EventPayload{Event: "lead", ContactID: a, GoalType: "lead", OccurredAt: t0}),
		env(t, ws, id("v1"), schemas.EventPayload{Event: "visit", ContactID: a, OccurredAt: t0.Add(5 * time.Hour)}),
		env(t, ws, id("v2"), schemas.EventPayload{Event: "visit", ContactID: b, OccurredAt: t0}),
		env(t, ws, id("anon"), schemas.EventPayload{Event: "visit", OccurredAt: t0.Add(9 * time.Hour)}),
		env(t, ws, id("ghost"), schemas.EventPayload{Event: "order", ContactID: "deleted-contact", GoalType: "purchase", Value: "1", OccurredAt: t0}),
	}
	outs := 0
	first := map[string][]string{} // event id → output ids
	for _, e := range evs {
		o, err := st.Handle(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		outs += len(o)
		for _, x := range o {
			first[e.ID] = append(first[e.ID], x.ID)
		}
		var p schemas.EventPayload
		_ = json.Unmarshal(e.Payload, &p)
		if p.ContactID == "" && len(o) != 0 {
			t.Fatalf("unmatched event produced %v", o)
		}
		if p.ContactID != "" {
			want := 2
			if p.GoalType != "" {
				want = 3 // and GOAL_RECORDED
			}
			if len(o) != want || o[0].Type != schemas.TypeWebhookEventRecorded || o[1].Type != schemas.TypeEventMatched ||
				o[0].ID != schemas.ChildID(e.ID, schemas.TypeWebhookEventRecorded, 0) || o[0].Key != ws+":"+p.ContactID {
				t.Fatalf("outputs of %s: %+v", e.ID, o)
			}
			var d schemas.EventRecordedData
			if err := json.Unmarshal(o[0].Payload, &d); err != nil || d.EventID != e.ID || d.ContactID != p.ContactID || string(d.Value) != p.Value {
				t.Fatalf("webhook data %s: %v", o[0].Payload, err)
			}
			if p.GoalType != "" {
				g := o[2]
				if g.Type != schemas.TypeWebhookGoalRecorded || g.ID != schemas.ChildID(e.ID, schemas.TypeWebhookGoalRecorded, 0) ||
					g.Key != ws+":"+p.ContactID || g.CausationID != e.ID || goals.Route(g) != schemas.TopicWebhooks {
					t.Fatalf("GOAL_RECORDED of %s: %+v", e.ID, g)
				}
				var gd schemas.EventRecordedData
				if err := json.Unmarshal(g.Payload, &gd); err != nil || gd.EventID != e.ID || gd.GoalType != p.GoalType || string(gd.Value) != p.Value {
					t.Fatalf("GOAL_RECORDED data %s: %v", g.Payload, err)
				}
			}
		}
	}
	// 8 matched events (2 each) of which 6 are goals (one more each).
	if outs != 22 {
		t.Fatalf("%d outputs, want 22", outs)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Everything redelivered, some twice, in a new batch: no change.
	// Each copy returns the same envelopes (GOAL_RECORDED included), under
	// the same ids, so receivers see one message.
	for _, e := range append(evs, evs[0], evs[2]) {
		o, err := st.Handle(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range o {
			ids = append(ids, x.ID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(first[e.ID]) {
			t.Fatalf("redelivered %s: outputs %v, first %v", e.ID, ids, first[e.ID])
		}
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, ok := read(t, pg, a)
	if !ok {
		t.Fatal("no activity for ann")
	}
	if got.goals != 5 || got.purchases != 2 || got.refunds != 1 || got.ltv != "129.99" ||
		!got.lastActivity.Equal(t0.Add(5*time.Hour)) || !got.lastPurchase.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("ann: goals %d purchases %d refunds %d ltv %s last %v lastPurchase %v", got.goals, got.purchases, got.refunds, got.ltv, got.lastActivity, got.lastPurchase)
	}
	gb, ok := read(t, pg, b)
	if !ok || gb.goals != 0 || gb.ltv != "0" || gb.lastPurchase != nil || !gb.lastActivity.Equal(t0) {
		t.Fatalf("bob: %+v %v", gb, ok)
	}
	if _, ok := read(t, pg, "deleted-contact"); ok {
		t.Fatal("activity for a contact that does not exist")
	}
	// An older event later moves nothing backwards.
	if _, err := st.Handle(ctx, env(t, ws, id("old"), schemas.EventPayload{Event: "visit", ContactID: a, OccurredAt: t0.Add(-time.Hour)})); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, pg, a); !got.lastActivity.Equal(t0.Add(5 * time.Hour)) {
		t.Fatalf("last activity moved to %v", got.lastActivity)
	}
}

func TestLedgerPruned(t *testing.T) {
	pg := stack.PG(t)
	ctx := context.Background()
	id := "prune-" + schemas.NewID()
	if _, err := pg.Exec(ctx, `INSERT INTO event_ledger (event_id, workspace_id, contact_id, applied_at)
		VALUES ($1, 'w', 'c', now() - interval '40 days'), ($1 || '-new', 'w', 'c', now())`, id); err != nil {
		t.Fatal(err)
	}
	st, err := goals.New(ctx, pipeline.Resources{Postgres: pg}, goals.Config{PruneEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var old, fresh int
		if err := pg.QueryRow(ctx, `SELECT count(*) FILTER (WHERE event_id = $1), count(*) FILTER (WHERE event_id = $1 || '-new')
			FROM event_ledger WHERE event_id LIKE $1 || '%'`, id).Scan(&old, &fresh); err != nil {
			t.Fatal(err)
		}
		if fresh != 1 {
			t.Fatal("a recent ledger entry was pruned")
		}
		if old == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the 40-day-old ledger entry was not pruned")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
