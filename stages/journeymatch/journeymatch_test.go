package journeymatch_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
	"sendstream/stages/journeymatch"
)

// fixture is a workspace with a template and two lists on the stack's
// Postgres, and the matching stage on it.
type fixture struct {
	pg       *pgxpool.Pool
	ws       string
	template string
	lists    [2]string
	store    *journeys.Store
	stage    *journeymatch.Stage
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pg := stack.PG(t)
	ctx := context.Background()
	f := &fixture{pg: pg, ws: schemas.NewID(), template: schemas.NewID(), lists: [2]string{schemas.NewID(), schemas.NewID()},
		store: journeys.NewStore(pg, nil)}
	f.stage = journeymatch.New(pg, f.store)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO workspaces (id, name) VALUES ($1, 'journey matching test')`, []any{f.ws}},
		{`INSERT INTO templates (id, workspace_id, html) VALUES ($1, $2, '<p>hi</p>')`, []any{f.template, f.ws}},
		{`INSERT INTO lists (id, workspace_id, name) VALUES ($1, $2, 'news')`, []any{f.lists[0], f.ws}},
		{`INSERT INTO lists (id, workspace_id, name) VALUES ($1, $2, 'other')`, []any{f.lists[1], f.ws}},
	} {
		if _, err := pg.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

var seq atomic.Int64

// contact inserts an ACTIVE contact and returns its id.
func (f *fixture) contact(t *testing.T) string {
	t.Helper()
	id := schemas.NewID()
	if _, err := f.pg.Exec(context.Background(), `INSERT INTO contacts (id, workspace_id, seq, email, status) VALUES ($1, $2, $3, $4, 'ACTIVE')`,
		id, f.ws, seq.Add(1), id+"@example.test"); err != nil {
		t.Fatal(err)
	}
	return id
}

// journey creates a journey from src (TPL and LIST0/LIST1 replaced) and
// returns its id.
func (f *fixture) journey(t *testing.T, src string) string {
	t.Helper()
	src = strings.NewReplacer("TPL", f.template, "LIST0", f.lists[0], "LIST1", f.lists[1]).Replace(src)
	d, err := schemas.ParseJourney([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := f.store.Create(context.Background(), f.ws, d)
	if err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// matched is the goals stage's hand-off of a recorded event.
func (f *fixture) matched(t *testing.T, p schemas.EventPayload) schemas.Envelope {
	t.Helper()
	if p.OccurredAt.IsZero() {
		p.OccurredAt = time.Now().UTC().Truncate(time.Millisecond)
	}
	p.ReceivedAt = p.OccurredAt
	if p.Source == "" {
		p.Source = schemas.EventSourceAPI
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	eventID := schemas.NewID()
	return schemas.Envelope{ID: schemas.ChildID(eventID, schemas.TypeEventMatched, 0), Workspace: f.ws, Type: schemas.TypeEventMatched,
		Key: f.ws + ":" + p.ContactID, OccurredAt: p.OccurredAt, CausationID: eventID, Payload: b}
}

// joined is contact.joined_list.v1 of contact to list.
func (f *fixture) joined(t *testing.T, contact, list, via string) schemas.Envelope {
	t.Helper()
	b, err := json.Marshal(schemas.ListMembershipPayload{ContactID: contact, Email: contact + "@example.test", ListID: list,
		ListName: "news", Status: "ACTIVE", Via: via})
	if err != nil {
		t.Fatal(err)
	}
	return schemas.Envelope{ID: schemas.NewID(), Workspace: f.ws, Type: schemas.TypeContactJoinedList, Key: f.ws + ":" + contact,
		OccurredAt: time.Now().UTC(), Payload: b}
}

func (f *fixture) handle(t *testing.T, env schemas.Envelope) []schemas.Envelope {
	t.Helper()
	out, err := f.stage.Handle(context.Background(), env)
	if err != nil {
		t.Fatalf("handle %s: %v", env.Type, err)
	}
	return out
}

// executions counts journey's executions of contact in state ("" any).
func (f *fixture) executions(t *testing.T, journey, contact, state string) int {
	t.Helper()
	var n int
	if err := f.pg.QueryRow(context.Background(), `SELECT count(*) FROM journey_executions
		WHERE journey_id = $1 AND contact_id = $2 AND ($3 = '' OR state = $3)`, journey, contact, state).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// started returns the started payloads among out (every envelope must be
// one, with its derived id, routed to the journeys topic).
func started(t *testing.T, out []schemas.Envelope) []schemas.JourneyExecutionStarted {
	t.Helper()
	var s []schemas.JourneyExecutionStarted
	for _, env := range out {
		if env.Type != schemas.TypeJourneyExecutionStarted {
			t.Errorf("unexpected %s", env.Type)
			continue
		}
		var p schemas.JourneyExecutionStarted
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if env.ID != schemas.JourneyStartedEnvelopeID(p.ExecutionID) || journeymatch.Route(env) != schemas.TopicJourneys {
			t.Errorf("started envelope id %s or route %s", env.ID, journeymatch.Route(env))
		}
		s = append(s, p)
	}
	return s
}

func ids(out []schemas.Envelope) string {
	var s []string
	for _, e := range out {
		s = append(s, e.ID)
	}
	return strings.Join(s, ",")
}

const steps = `"steps":[{"type":"delay","duration":"1d"},{"type":"send_email","templateId":"TPL"}]`

// An event of a contact starts exactly one execution of a listening once
// journey even when delivered twice; the redelivery returns the same
// envelopes; the trigger's data is the event's properties; another event
// of the same name is refused by re-entry without an error.
func TestEventStartsOnceJourneyOnce(t *testing.T) {
	f := newFixture(t)
	j := f.journey(t, `{"name":"Signup","status":"active","reentry":"once","trigger":{"type":"event","event":"signed.up"},`+steps+`}`)
	other := f.journey(t, `{"name":"Other","status":"active","reentry":"once","trigger":{"type":"event","event":"logged.in"},`+steps+`}`)
	c := f.contact(t)
	env := f.matched(t, schemas.EventPayload{Event: "signed.up", ContactID: c, Properties: json.RawMessage(`{"plan":"gold"}`)})
	first := f.handle(t, env)
	s := started(t, first)
	if len(s) != 1 || s[0].JourneyID != j || s[0].ContactID != c || s[0].Trigger != schemas.TriggerEvent ||
		string(s[0].Data) != `{"plan":"gold"}` || s[0].SourceID != env.CausationID ||
		s[0].ExecutionID != journeys.MatchedExecutionID(env.ID, j) {
		t.Fatalf("started %+v", s)
	}
	again := f.handle(t, env)
	if ids(again) != ids(first) || len(again) != 1 {
		t.Errorf("redelivery returned %s, first %s", ids(again), ids(first))
	}
	if n := f.executions(t, j, c, ""); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
	if n := f.executions(t, other, c, ""); n != 0 {
		t.Errorf("a journey listening for another name started %d executions", n)
	}
	if out := f.handle(t, f.matched(t, schemas.EventPayload{Event: "signed.up", ContactID: c})); len(out) != 0 {
		t.Errorf("a second event on a once journey returned %s", ids(out))
	}
	if n := f.executions(t, j, c, ""); n != 1 {
		t.Errorf("%d executions after a second event, want 1", n)
	}
}

// A website event (from /public/events) starts only website_event
// journeys of its name; the same name through /v1/events starts only the
// event ones. An event that matched no contact starts nothing.
func TestWebsiteEventAndNoContact(t *testing.T) {
	f := newFixture(t)
	ev := f.journey(t, `{"name":"E","status":"active","reentry":"always","trigger":{"type":"event","event":"pricing.viewed"},`+steps+`}`)
	web := f.journey(t, `{"name":"W","status":"active","reentry":"always","trigger":{"type":"website_event","event":"pricing.viewed"},`+steps+`}`)
	c := f.contact(t)
	s := started(t, f.handle(t, f.matched(t, schemas.EventPayload{Event: "pricing.viewed", ContactID: c, Source: schemas.EventSourcePublic})))
	if len(s) != 1 || s[0].JourneyID != web || s[0].Trigger != schemas.TriggerWebsiteEvent || string(s[0].Data) != "null" {
		t.Errorf("website event started %+v, want only %s", s, web)
	}
	if f.executions(t, ev, c, "") != 0 || f.executions(t, web, c, "") != 1 {
		t.Errorf("executions: event journey %d, website journey %d; want 0, 1", f.executions(t, ev, c, ""), f.executions(t, web, c, ""))
	}
	for _, src := range []string{schemas.EventSourceAPI, schemas.EventSourceImport} {
		s = started(t, f.handle(t, f.matched(t, schemas.EventPayload{Event: "pricing.viewed", ContactID: c, Source: src})))
		if len(s) != 1 || s[0].JourneyID != ev {
			t.Errorf("%s event started %+v, want only %s", src, s, ev)
		}
	}
	if out := f.handle(t, f.matched(t, schemas.EventPayload{Event: "pricing.viewed", Email: "nobody@example.test"})); len(out) != 0 {
		t.Errorf("an event with no contact returned %s", ids(out))
	}
	var n int
	if err := f.pg.QueryRow(context.Background(), `SELECT count(*) FROM journey_executions WHERE workspace_id = $1`, f.ws).Scan(&n); err != nil || n != 3 {
		t.Errorf("%d executions in the workspace (%v), want 3", n, err)
	}
}

// A list join starts the list_joined journey of that list (with the
// list's id and name as data) and not another list's; a draft or paused
// journey starts nothing.
func TestListJoinAndInactiveJourneys(t *testing.T) {
	f := newFixture(t)
	j := f.journey(t, `{"name":"L","status":"active","reentry":"once","trigger":{"type":"list_joined","listId":"LIST0"},`+steps+`}`)
	otherList := f.journey(t, `{"name":"L1","status":"active","reentry":"once","trigger":{"type":"list_joined","listId":"LIST1"},`+steps+`}`)
	draft := f.journey(t, `{"name":"D","status":"draft","reentry":"always","trigger":{"type":"list_joined","listId":"LIST0"},`+steps+`}`)
	paused := f.journey(t, `{"name":"P","status":"active","reentry":"always","trigger":{"type":"list_joined","listId":"LIST0"},`+steps+`}`)
	if _, err := f.store.SetStatus(context.Background(), f.ws, paused, schemas.JourneyPaused); err != nil {
		t.Fatal(err)
	}
	pausedEv := f.journey(t, `{"name":"PE","status":"active","reentry":"always","trigger":{"type":"event","event":"signed.up"},`+steps+`}`)
	if _, err := f.store.SetStatus(context.Background(), f.ws, pausedEv, schemas.JourneyPaused); err != nil {
		t.Fatal(err)
	}
	draftEv := f.journey(t, `{"name":"DE","status":"draft","reentry":"always","trigger":{"type":"event","event":"signed.up"},`+steps+`}`)

	c := f.contact(t)
	for _, via := range []string{"api", "confirmation"} {
		s := started(t, f.handle(t, f.joined(t, c, f.lists[0], via)))
		if via == "confirmation" {
			// The once journey refuses a second entry.
			if len(s) != 0 {
				t.Errorf("second join started %+v", s)
			}
			continue
		}
		if len(s) != 1 || s[0].JourneyID != j || s[0].Trigger != schemas.TriggerListJoined {
			t.Fatalf("list join started %+v, want only %s", s, j)
		}
		var data map[string]string
		if err := json.Unmarshal(s[0].Data, &data); err != nil || data["listId"] != f.lists[0] || data["listName"] != "news" {
			t.Errorf("trigger data %s", s[0].Data)
		}
	}
	// A double opt-in confirmation of another contact starts it too.
	c2 := f.contact(t)
	if s := started(t, f.handle(t, f.joined(t, c2, f.lists[0], "confirmation"))); len(s) != 1 || s[0].JourneyID != j {
		t.Errorf("confirmation started %+v", s)
	}
	if out := f.handle(t, f.matched(t, schemas.EventPayload{Event: "signed.up", ContactID: c})); len(out) != 0 {
		t.Errorf("an event for paused and draft journeys returned %s", ids(out))
	}
	for _, id := range []string{otherList, draft, paused, pausedEv, draftEv} {
		if n := f.executions(t, id, c, "") + f.executions(t, id, c2, ""); n != 0 {
			t.Errorf("journey %s started %d executions", id, n)
		}
	}
}

// An exitOn goal ends the contact's running execution as converted with
// the goal's value (counted in stats' revenue) and returns
// JOURNEY_CONVERTED; a redelivery converts nothing again and returns the
// same envelope; another contact's execution, and a journey without that
// exitOn, keep running. An exitOn event converts without a value.
func TestExitOnConverts(t *testing.T) {
	f := newFixture(t)
	j := f.journey(t, `{"name":"Cart","status":"active","reentry":"always","trigger":{"type":"event","event":"cart.left"},
		"exitOn":{"goalType":"purchase"},`+steps+`}`)
	byEvent := f.journey(t, `{"name":"Trial","status":"active","reentry":"always","trigger":{"type":"event","event":"cart.left"},
		"exitOn":{"event":"upgraded"},`+steps+`}`)
	c, other := f.contact(t), f.contact(t)
	for _, id := range []string{c, other} {
		if s := started(t, f.handle(t, f.matched(t, schemas.EventPayload{Event: "cart.left", ContactID: id}))); len(s) != 2 {
			t.Fatalf("started %d executions, want 2", len(s))
		}
	}
	goal := f.matched(t, schemas.EventPayload{Event: "order", ContactID: c, GoalType: schemas.GoalPurchase, Value: "42.5", Currency: "EUR"})
	out := f.handle(t, goal)
	if len(out) != 1 || out[0].Type != schemas.TypeWebhookJourneyConverted || journeymatch.Route(out[0]) != schemas.TopicWebhooks {
		t.Fatalf("goal returned %d envelopes %v, want one JOURNEY_CONVERTED", len(out), out)
	}
	var d schemas.JourneyWebhookData
	if err := json.Unmarshal(out[0].Payload, &d); err != nil {
		t.Fatal(err)
	}
	if d.JourneyID != j || d.JourneyName != "Cart" || d.ContactID != c || d.Email != c+"@example.test" || d.Value != "42.5" ||
		d.GoalType != schemas.GoalPurchase || d.Currency != "EUR" || d.EventID != goal.CausationID || d.Event != "order" ||
		out[0].ID != schemas.JourneyWebhookID(d.ExecutionID, schemas.TypeWebhookJourneyConverted) {
		t.Errorf("JOURNEY_CONVERTED %+v id %s", d, out[0].ID)
	}
	if f.executions(t, j, c, journeys.StateConverted) != 1 || f.executions(t, j, other, journeys.StateActive) != 1 ||
		f.executions(t, byEvent, c, journeys.StateActive) != 1 {
		t.Errorf("states: converted %d (want 1), other contact active %d (want 1), other journey active %d (want 1)",
			f.executions(t, j, c, journeys.StateConverted), f.executions(t, j, other, journeys.StateActive),
			f.executions(t, byEvent, c, journeys.StateActive))
	}
	again := f.handle(t, goal)
	if ids(again) != ids(out) {
		t.Errorf("redelivery returned %s, first %s", ids(again), ids(out))
	}
	st, err := f.store.Stats(context.Background(), f.ws, j)
	if err != nil {
		t.Fatal(err)
	}
	if st.Entered != 2 || st.Converted != 1 || st.Active != 1 || st.Revenue != 42.5 {
		t.Errorf("stats %+v, want entered 2, converted 1, active 1, revenue 42.5", st)
	}
	out = f.handle(t, f.matched(t, schemas.EventPayload{Event: "upgraded", ContactID: c}))
	if len(out) != 1 || out[0].Type != schemas.TypeWebhookJourneyConverted {
		t.Fatalf("exitOn event returned %v", out)
	}
	if st, _ := f.store.Stats(context.Background(), f.ws, byEvent); st.Converted != 1 || st.Revenue != 0 {
		t.Errorf("exitOn event stats %+v, want converted 1 and no revenue", st)
	}
}

// The lifecycle stage announces every started execution (a matched one
// and one from the trigger endpoint) as JOURNEY_STARTED, and an execution
// whose last step completed it as JOURNEY_COMPLETED, each under an id
// derived from the execution; other steps and wake-ups announce nothing.
func TestLifecycleAnnounces(t *testing.T) {
	f := newFixture(t)
	j := f.journey(t, `{"name":"Done","status":"active","reentry":"always","trigger":{"type":"event","event":"x"},`+steps+`}`)
	api := f.journey(t, `{"name":"Api","status":"active","reentry":"always","trigger":{"type":"api_event"},`+steps+`}`)
	c := f.contact(t)
	matchedOut := f.handle(t, f.matched(t, schemas.EventPayload{Event: "x", ContactID: c}))
	s := started(t, matchedOut)
	if len(s) != 1 {
		t.Fatalf("started %+v", s)
	}
	var apiExec journeys.Execution
	if err := pgx.BeginFunc(context.Background(), f.pg, func(tx pgx.Tx) error {
		var err error
		apiExec, err = f.store.Start(context.Background(), tx, journeys.StartInput{Workspace: f.ws, JourneyID: api,
			Trigger: schemas.TriggerAPIEvent, ContactID: c, ExecutionID: schemas.NewID()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stage := journeymatch.NewLifecycle(f.store)
	handle := func(env schemas.Envelope) []schemas.Envelope {
		t.Helper()
		out, err := stage.Handle(context.Background(), env)
		if err != nil {
			t.Fatalf("lifecycle %s: %v", env.Type, err)
		}
		return out
	}
	hook := func(out []schemas.Envelope, typ, exec string) schemas.JourneyWebhookData {
		t.Helper()
		if len(out) != 1 || out[0].Type != typ || out[0].ID != schemas.JourneyWebhookID(exec, typ) {
			t.Fatalf("got %v, want one %s of %s", out, typ, exec)
		}
		var d schemas.JourneyWebhookData
		if err := json.Unmarshal(out[0].Payload, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		env                          schemas.Envelope
		journey, name, trigger, exec string
	}{
		{matchedOut[0], j, "Done", schemas.TriggerEvent, s[0].ExecutionID},
		{journeys.StartedEnvelope(apiExec, "request"), api, "Api", schemas.TriggerAPIEvent, apiExec.ID},
	} {
		first := handle(tc.env)
		d := hook(first, schemas.TypeWebhookJourneyStarted, tc.exec)
		if d.JourneyID != tc.journey || d.JourneyName != tc.name || d.Trigger != tc.trigger || d.ContactID != c ||
			d.Email != c+"@example.test" || d.Version != 1 || d.OccurredAt.IsZero() {
			t.Errorf("JOURNEY_STARTED %+v", d)
		}
		if again := handle(tc.env); ids(again) != ids(first) {
			t.Errorf("redelivery returned %s, first %s", ids(again), ids(first))
		}
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	step := func(final string) schemas.Envelope {
		return schemas.JourneyStepEnvelope(f.ws, "cause", schemas.JourneyStepDone{ExecutionID: s[0].ExecutionID, JourneyID: j,
			Version: 1, ContactID: c, Step: "1", StepType: schemas.StepSendEmail, Outcome: schemas.StepOutcomeSent, At: at, Final: final})
	}
	if out := handle(step("")); len(out) != 0 {
		t.Errorf("a step that does not end the execution returned %v", out)
	}
	odd := schemas.JourneyStepEnvelope(f.ws, "cause", schemas.JourneyStepDone{ExecutionID: s[0].ExecutionID, JourneyID: j,
		Version: 1, ContactID: c, Step: "1", StepType: schemas.StepSendEmail, Outcome: schemas.StepOutcomeSent, At: at, Detail: "final"})
	if out := handle(odd); len(out) != 0 {
		t.Errorf("a step whose detail reads \"final\" returned %v", out)
	}
	if out := handle(step(journeys.StateExited)); len(out) != 0 {
		t.Errorf("an exit returned %v", out)
	}
	wake := schemas.JourneyWakeEnvelope(schemas.NewID(), f.ws, f.ws+":"+c, "cause",
		schemas.JourneyWake{ExecutionID: s[0].ExecutionID, Position: "0", DueAt: at})
	if out := handle(wake); len(out) != 0 {
		t.Errorf("a wake-up returned %v", out)
	}
	d := hook(handle(step(journeys.StateCompleted)), schemas.TypeWebhookJourneyCompleted, s[0].ExecutionID)
	if d.JourneyID != j || d.JourneyName != "Done" || d.Email != c+"@example.test" || !d.OccurredAt.Equal(at) || d.Version != 1 {
		t.Errorf("JOURNEY_COMPLETED %+v", d)
	}
	// The engine's step-done envelope carries the contact's email: the
	// event is made from it and the journey's name, without reading the
	// execution (this one has none).
	gone := schemas.NewID()
	d = hook(handle(schemas.JourneyStepEnvelope(f.ws, "cause", schemas.JourneyStepDone{ExecutionID: gone, JourneyID: j,
		Version: 1, ContactID: c, Step: "1", StepType: schemas.StepSendEmail, Outcome: schemas.StepOutcomeSent, At: at,
		Final: journeys.StateCompleted, Email: "as-read@example.test"})), schemas.TypeWebhookJourneyCompleted, gone)
	if d.JourneyID != j || d.JourneyName != "Done" || d.Email != "as-read@example.test" || d.ContactID != c || d.Version != 1 {
		t.Errorf("JOURNEY_COMPLETED from an envelope with the email %+v", d)
	}
}

// TestIgnoresWorkspacesKnownToHaveNoJourney: the stage ignores other types
// at once, and a matched event or list join only once it has looked the
// workspace up and found no journey; a workspace with one is never
// ignored.
func TestIgnoresWorkspacesKnownToHaveNoJourney(t *testing.T) {
	f := newFixture(t)
	c := f.contact(t)
	if !f.stage.Ignores(&schemas.Envelope{Workspace: f.ws, Type: schemas.TypeContactCreated}) {
		t.Fatal("a contact change is not ignored")
	}
	env := f.matched(t, schemas.EventPayload{Event: "signed.up", ContactID: c})
	if f.stage.Ignores(&env) {
		t.Fatal("ignored before the workspace was looked up")
	}
	if out := f.handle(t, env); len(out) != 0 {
		t.Fatalf("a workspace without journeys returned %s", ids(out))
	}
	if !f.stage.Ignores(&env) {
		t.Fatal("not ignored once the workspace is known to have no journey")
	}
	joined := f.joined(t, c, f.lists[0], "api")
	if !f.stage.Ignores(&joined) {
		t.Fatal("a list join of that workspace is not ignored")
	}

	g := newFixture(t)
	g.journey(t, `{"name":"Signup","status":"active","reentry":"once","trigger":{"type":"event","event":"signed.up"},`+steps+`}`)
	genv := g.matched(t, schemas.EventPayload{Event: "signed.up", ContactID: g.contact(t)})
	if out := g.handle(t, genv); len(out) != 1 {
		t.Fatalf("the journey did not start: %s", ids(out))
	}
	if g.stage.Ignores(&genv) {
		t.Fatal("a workspace with a journey is ignored")
	}
}
