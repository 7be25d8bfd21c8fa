package journeys_test

import (
	"context"
	"strings"
	"testing"

	"sendstream/ingest/contacts"
	"sendstream/schemas"
	"sendstream/stages/journeymatch"
	engine "sendstream/stages/journeys"
)

// TestStepsDoNotRestartTheirJourney runs list_joined journeys whose steps
// leave their trigger list and join it again, through the real engine,
// the contacts store's list steps and the matching stage, feeding every
// output back until nothing is left:
//   - self: `reentry: always` on list L0, steps remove_from_list L0 and
//     add_to_list L0: the join its own step made does not start it again;
//   - a and b: a on L1 joins L2, b on L2 joins L1: a starts b, and b's
//     join of L1 does not start a again (a is b's ancestry).
//
// A join by the contact itself (not a step) starts the journey again.
func TestStepsDoNotRestartTheirJourney(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cs := contacts.NewStore(f.pg)
	t.Cleanup(cs.Close)
	scope := "test-" + schemas.NewID()
	cs.SetOutboxScope(scope)
	t.Cleanup(func() { _, _ = f.pg.Exec(context.Background(), `DELETE FROM contact_outbox WHERE scope = $1`, scope) })
	writer := contacts.NewStageWriter(cs)
	stage := engine.New(engine.Options{Store: f.store, Postgres: f.pg, Timers: f.sched, Mailer: f.mail, Contacts: writer, Now: f.clock.now})
	m := journeymatch.New(f.pg, f.store)
	var lists [3]string
	for i := range lists {
		lists[i] = schemas.NewID()
		if _, err := f.pg.Exec(ctx, `INSERT INTO lists (id, workspace_id, name) VALUES ($1, $2, $3)`, lists[i], f.ws, "l"+lists[i][:6]); err != nil {
			t.Fatal(err)
		}
	}
	journey := func(name string, trigger int, steps string) string {
		src := `{"name":"` + name + `","status":"active","reentry":"always","trigger":{"type":"list_joined","listId":"L` +
			string(rune('0'+trigger)) + `"},"steps":` + steps + `}`
		return f.journey(t, strings.NewReplacer("L0", lists[0], "L1", lists[1], "L2", lists[2]).Replace(src))
	}
	self := journey("self", 0, `[{"type":"remove_from_list","listId":"L0"},{"type":"add_to_list","listId":"L0"}]`)
	a := journey("a", 1, `[{"type":"remove_from_list","listId":"L2"},{"type":"add_to_list","listId":"L2"}]`)
	b := journey("b", 2, `[{"type":"remove_from_list","listId":"L1"},{"type":"add_to_list","listId":"L1"}]`)

	seq++
	contact, email := schemas.NewID(), schemas.NewID()+"@example.test"
	if _, err := f.pg.Exec(ctx, `INSERT INTO contacts (id, workspace_id, seq, email, status) VALUES ($1, $2, $3, $4, 'ACTIVE')`,
		contact, f.ws, seq, email); err != nil {
		t.Fatal(err)
	}
	// run feeds envs and every output through matching and the engine
	// until nothing is left.
	run := func(envs []schemas.Envelope) {
		t.Helper()
		for rounds := 0; len(envs) > 0; rounds++ {
			if rounds > 50 {
				t.Fatalf("still going after %d rounds: the journeys loop", rounds)
			}
			var next []schemas.Envelope
			for _, env := range envs {
				var out []schemas.Envelope
				var err error
				switch {
				case strings.HasPrefix(env.Type, "contact."):
					out, err = m.Handle(ctx, env)
				case env.Type == schemas.TypeJourneyExecutionStarted:
					out, err = stage.Handle(ctx, env)
				}
				if err != nil {
					t.Fatalf("%s: %v", env.Type, err)
				}
				next = append(next, out...)
			}
			envs = next
		}
	}
	join := func(list int) {
		t.Helper()
		// The contact joins by itself (a request, not a step).
		events, refused, err := writer.SetListMembership(ctx, f.ws, contact, lists[list], true, "request-"+schemas.NewID())
		if err != nil || refused != "" {
			t.Fatalf("join: %v %s", err, refused)
		}
		run(events)
	}
	count := func(j string) (n int) {
		t.Helper()
		if err := f.pg.QueryRow(ctx, `SELECT count(*) FROM journey_executions WHERE journey_id = $1 AND state = 'completed'`, j).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	join(0)
	join(1)
	if s, na, nb := count(self), count(a), count(b); s != 1 || na != 1 || nb != 1 {
		t.Fatalf("completed executions: self %d, a %d, b %d; want 1 each", s, na, nb)
	}
	var ancestry []string
	if err := f.pg.QueryRow(ctx, `SELECT ancestry FROM journey_executions WHERE journey_id = $1`, b).Scan(&ancestry); err != nil ||
		len(ancestry) != 1 || ancestry[0] != a {
		t.Errorf("b's ancestry %v (%v), want [a]", ancestry, err)
	}
	// The contact leaves and joins L0 again by itself: self starts again.
	if _, _, err := writer.SetListMembership(ctx, f.ws, contact, lists[0], false, "request-"+schemas.NewID()); err != nil {
		t.Fatal(err)
	}
	join(0)
	if s := count(self); s != 2 {
		t.Errorf("after the contact's own new join: self completed %d, want 2", s)
	}
}
