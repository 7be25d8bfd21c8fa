package transactional_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/transactional"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
	"sendstream/sinks/timers"
	engine "sendstream/stages/journeys"
)

// journeyEnv is the transactional env plus the journey engine stage, run
// on the same broker with timers of a queue of its own and the
// transactional Mailer as the root wiring passes it.
type journeyEnv struct {
	*env
	journeys *journeys.Store
	stage    *engine.Stage
}

func newJourneyEnv(t *testing.T) *journeyEnv {
	e := newEnv(t, envOpts{})
	tm, err := timers.Start(context.Background(), e.pg, e.h.Publisher, timers.Config{Queue: "timers_test_" + schemas.NewID()[16:]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tm.Close() })
	mailer, err := transactional.NewMailer(transactional.Deps{PG: e.pg, Secret: secret, SiteURL: e.h.URL})
	if err != nil {
		t.Fatal(err)
	}
	je := &journeyEnv{env: e, journeys: journeys.NewStore(e.pg, nil)}
	je.stage = engine.New(engine.Options{Store: je.journeys, Postgres: e.pg, Timers: tm, Mailer: mailer,
		Contacts: contacts.NewStageWriter(e.contacts)})
	reg := pipeline.Registered{Name: "journeys-test-" + schemas.NewID()[16:], Consumes: schemas.TopicJourneys,
		Produces: []string{schemas.TopicJourneySteps, schemas.TopicTransactional, schemas.TopicContacts}, Route: engine.Route, Concurrency: 8,
		Build: func(context.Context, pipeline.Resources) (pipeline.Stage, error) { return je.stage, nil }}
	e.runPipeline("journey pipeline", []pipeline.Registered{reg}, pipeline.Resources{Postgres: e.pg, Publisher: e.h.Publisher})
	return je
}

// start starts an execution of journey id for contact email with data, as
// the trigger endpoint does, and publishes its announcement.
func (je *journeyEnv) start(ws, id, email string, data map[string]any) schemas.Envelope {
	je.t.Helper()
	raw, _ := json.Marshal(data)
	var started schemas.Envelope
	err := pgx.BeginFunc(context.Background(), je.pg, func(tx pgx.Tx) error {
		ex, err := je.journeys.Start(context.Background(), tx, journeys.StartInput{Workspace: ws, JourneyID: id,
			Trigger: schemas.TriggerAPIEvent, Email: email, ExecutionID: schemas.NewID(), Data: raw})
		started = journeys.StartedEnvelope(ex, "test")
		return err
	})
	if err != nil {
		je.t.Fatalf("start %s: %v", email, err)
	}
	if err := je.h.Publisher.Publish(context.Background(), schemas.TopicJourneys, started); err != nil {
		je.t.Fatal(err)
	}
	return started
}

// subjectsTo returns the subjects of the messages to addr, in arrival order.
func (je *journeyEnv) subjectsTo(addr string) []string {
	var out []string
	for _, m := range je.messagesTo(addr) {
		out = append(out, parse(je.t, m).subject())
	}
	return out
}

// TestJourneySendDelayBranchSend: an api_event journey (send, delay 4s,
// branch on a purchase goal, send one of two templates, all under a
// marketing policy) for three contacts. The buyer (a purchase recorded
// while it waits) gets the first email and the "then" one, the browser
// the first and the "else" one, the leaver, who unsubscribes with the
// first email's one-click link while waiting, only the first. Subjects and
// bodies render the trigger's data and the contact. Every execution
// completes; redelivering the started and wake-up envelopes sends nothing
// more, and a redelivered envelope's outputs are its steps' again.
func TestJourneySendDelayBranchSend(t *testing.T) {
	je := newJourneyEnv(t)
	ctx := context.Background()
	ws, _ := je.workspace(ingesttest.WorkspaceOpts{})
	if _, err := je.store.CreatePolicy(ctx, ws, transactional.Policy{Key: "news", Kind: schemas.PolicyMarketing, FromEmail: "news@bake.test", FromName: "Bake"}); err != nil {
		t.Fatal(err)
	}
	first := je.template(ws, transactional.Template{Name: "welcome", Subject: "Welcome {{ contact.first_name }} to {{ plan }}",
		HTML: "<html><body><p>Your plan: {{ plan }}, code {{ offer.code }}</p></body></html>"})
	thanks := je.template(ws, transactional.Template{Name: "thanks", Subject: "Thanks for buying {{ plan }}",
		HTML: "<html><body><p>Enjoy {{ plan }}</p></body></html>"})
	nudge := je.template(ws, transactional.Template{Name: "nudge", Subject: "unused", HTML: "<html><body><p>Still {{ plan }}?</p></body></html>"})
	def, err := schemas.ParseJourney([]byte(fmt.Sprintf(`{"name":"Welcome","status":"active","reentry":"once",
		"trigger":{"type":"api_event"},
		"steps":[{"type":"send_email","templateId":%q,"sendPolicy":"news"},
		         {"type":"delay","duration":"4s"},
		         {"type":"branch","if":{"goal":"purchase","countAtLeast":1},
		          "then":[{"type":"send_email","templateId":%q,"sendPolicy":"news"}],
		          "else":[{"type":"send_email","templateId":%q,"sendPolicy":"news","subject":"Still thinking about {{ plan }}, {{ contact.first_name }}?"}]}]}`,
		first, thanks, nudge)))
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := je.journeys.Create(ctx, ws, def)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"Bea", "Bo", "Lea"} // buyer, browser, leaver
	addrs := make([]string, 3)
	ids := make([]string, 3)
	started := make([]schemas.Envelope, 3)
	for i, n := range names {
		addrs[i] = uniq(strings.ToLower(n))
		ids[i] = je.contact(ws, addrs[i], contacts.Fields{FirstName: ptr(n)}).ID
	}
	for i, n := range names {
		started[i] = je.start(ws, j.ID, addrs[i], map[string]any{"plan": "gold-" + n, "offer": map[string]any{"code": "C" + n}})
	}
	// The first email, rendered with the trigger's data and the contact.
	for i, n := range names {
		m := je.waitMessage(addrs[i])
		if want := "Welcome " + n + " to gold-" + n; m.subject() != want {
			t.Errorf("first subject %q, want %q", m.subject(), want)
		}
		if html := string(m.leaf("text/html").body); !strings.Contains(html, "Your plan: gold-"+n+", code C"+n) {
			t.Errorf("first html of %s: %s", n, html)
		}
		if i == 2 { // the leaver unsubscribes with the one-click link while waiting
			link := strings.Trim(m.header.Get("List-Unsubscribe"), "<>")
			resp, err := http.Post(link, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("one-click unsubscribe: %d", resp.StatusCode)
			}
		}
	}
	// The buyer purchases while waiting (what the goals stage keeps).
	je.exec(`INSERT INTO contact_activity (contact_id, workspace_id, goals, lifetime_value, purchase_count, last_purchase_at)
	         VALUES ($1, $2, 1, 42, 1, now())`, ids[0], ws)

	// Every execution completes.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var active int
		if err := je.pg.QueryRow(ctx, `SELECT count(*) FROM journey_executions WHERE journey_id = $1 AND state = 'active'`, j.ID).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if active == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d executions still active", active)
		}
		time.Sleep(100 * time.Millisecond)
	}
	want := [][]string{
		{"Welcome Bea to gold-Bea", "Thanks for buying gold-Bea"},
		{"Welcome Bo to gold-Bo", "Still thinking about gold-Bo, Bo?"},
		{"Welcome Lea to gold-Lea"},
	}
	check := func(when string) {
		for i := range names {
			// Delivery follows the engine's commit: wait for the expected count.
			for end := time.Now().Add(20 * time.Second); len(je.messagesTo(addrs[i])) < len(want[i]) && time.Now().Before(end); {
				time.Sleep(50 * time.Millisecond)
			}
			if got := je.subjectsTo(addrs[i]); fmt.Sprint(got) != fmt.Sprint(want[i]) {
				t.Errorf("%s: %s got %q, want %q", when, names[i], got, want[i])
			}
		}
	}
	time.Sleep(1500 * time.Millisecond) // room for a duplicate to show up
	check("after the run")
	st, err := je.journeys.Stats(ctx, ws, j.ID)
	if err != nil || st.Entered != 3 || st.Completed != 3 {
		t.Errorf("stats %+v %v, want 3 entered and completed", st, err)
	}
	counts, err := je.journeys.StepCounts(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantCounts := "[{0 send_email sent 3} {1 delay done 3} {2 branch else 2} {2 branch then 1} {2.else.0 send_email sent 1} {2.else.0 send_email suppressed 1} {2.then.0 send_email sent 1}]"
	if fmt.Sprint(counts) != wantCounts {
		t.Errorf("step counts %v, want %s", counts, wantCounts)
	}

	// The step-done envelopes: the leaver's last send was suppressed.
	steps := je.waitEnvelopes(schemas.TopicJourneySteps, schemas.TypeJourneyStepDone, ws, 4*3)
	outcomes := map[string]string{}
	for _, env := range steps {
		var d schemas.JourneyStepDone
		if err := json.Unmarshal(env.Payload, &d); err != nil {
			t.Fatal(err)
		}
		outcomes[d.ContactID+" "+d.Step] = d.Outcome + " " + d.Final
	}
	for k, v := range map[string]string{
		ids[0] + " 0": "sent ", ids[0] + " 1": "done ", ids[0] + " 2": "then ", ids[0] + " 2.then.0": "sent completed",
		ids[1] + " 2": "else ", ids[1] + " 2.else.0": "sent completed",
		ids[2] + " 2": "else ", ids[2] + " 2.else.0": "suppressed completed",
	} {
		if outcomes[k] != v {
			t.Errorf("step %s: %q, want %q", k, outcomes[k], v)
		}
	}

	// Redelivery: handling a started envelope again returns its step's
	// output (the send's step-done envelope, no send: the message left
	// the queue) and sends nothing.
	out, err := je.stage.Handle(ctx, started[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Type != schemas.TypeJourneyStepDone || out[0].ID != schemas.JourneyStepEnvelopeID(outcomeExec(t, out[0]), "0") {
		t.Errorf("redelivered started envelope: %+v", out)
	}
	// Every started and wake-up envelope on the topic, published again.
	var again []schemas.Envelope
	for _, env := range je.h.Consume(t, schemas.TopicJourneys) {
		if env.Workspace == ws {
			again = append(again, env)
		}
	}
	if len(again) < 6 {
		t.Fatalf("%d envelopes on the journeys topic, want the 3 started and 3 wake-ups", len(again))
	}
	if err := je.h.Publisher.Publish(ctx, schemas.TopicJourneys, again...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	check("after redelivery")
}

// outcomeExec is the execution id of a step-done envelope.
func outcomeExec(t *testing.T, env schemas.Envelope) string {
	var d schemas.JourneyStepDone
	if err := json.Unmarshal(env.Payload, &d); err != nil {
		t.Fatal(err)
	}
	return d.ExecutionID
}

// waitDone waits until no execution of journey id is active.
func (je *journeyEnv) waitDone(id string) {
	je.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var active int
		if err := je.pg.QueryRow(context.Background(), `SELECT count(*) FROM journey_executions WHERE journey_id = $1 AND state = 'active'`, id).Scan(&active); err != nil {
			je.t.Fatal(err)
		}
		if active == 0 {
			return
		}
		if time.Now().After(deadline) {
			je.t.Fatalf("%d executions still active", active)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestJourneyContactSteps: update_contact, add_to_list, a branch on the
// membership, a send rendering the updated contact, remove_from_list and
// exit. The contact and its membership change in Postgres as the contacts
// API changes them, their events reach the contacts topic (the same types
// the API announces), the execution ends as exited, and a redelivered
// started envelope changes and announces nothing new.
func TestJourneyContactSteps(t *testing.T) {
	je := newJourneyEnv(t)
	ctx := context.Background()
	ws, _ := je.workspace(ingesttest.WorkspaceOpts{})
	list, err := je.contacts.CreateList(ctx, ws, "VIP", false)
	if err != nil {
		t.Fatal(err)
	}
	tpl := je.template(ws, transactional.Template{Name: "hi", Subject: "Hi {{ contact.first_name }} from {{ contact.country }}",
		HTML: "<html><body><p>Welcome to VIP</p></body></html>"})
	def, err := schemas.ParseJourney([]byte(fmt.Sprintf(`{"name":"VIP","status":"active","reentry":"always",
		"trigger":{"type":"api_event"},
		"steps":[{"type":"update_contact","set":{"firstName":"Vera","country":"NL"}},
		         {"type":"add_to_list","listId":%q},
		         {"type":"branch","if":{"inList":%q},"then":[{"type":"send_email","templateId":%q}]},
		         {"type":"remove_from_list","listId":%q},
		         {"type":"exit"},
		         {"type":"send_email","templateId":%q}]}`, list.ID, list.ID, tpl, list.ID, tpl)))
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := je.journeys.Create(ctx, ws, def)
	if err != nil {
		t.Fatal(err)
	}
	addr := uniq("vera")
	c := je.contact(ws, addr, contacts.Fields{FirstName: ptr("V")})
	started := je.start(ws, j.ID, addr, nil)
	je.waitDone(j.ID)
	if got := je.subjectsTo(addr); len(got) != 0 && fmt.Sprint(got) != "[Hi Vera from NL]" {
		t.Fatalf("subjects %q", got)
	}
	for end := time.Now().Add(20 * time.Second); len(je.messagesTo(addr)) == 0 && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if got := je.subjectsTo(addr); fmt.Sprint(got) != "[Hi Vera from NL]" {
		t.Fatalf("subjects %q, want the one send before exit", got)
	}
	var first, country, member, state string
	if err := je.pg.QueryRow(ctx, `SELECT c.first_name, c.country, m.status, e.state FROM contacts c
		JOIN memberships m ON m.contact_id = c.id AND m.list_id = $2
		JOIN journey_executions e ON e.contact_id = c.id AND e.journey_id = $3 WHERE c.id = $1`, c.ID, list.ID, j.ID).
		Scan(&first, &country, &member, &state); err != nil {
		t.Fatal(err)
	}
	if first != "Vera" || country != "NL" || member != "UNSUBSCRIBED" || state != "exited" {
		t.Errorf("contact %s %s, membership %s, execution %s", first, country, member, state)
	}
	types := func() map[string]int {
		n := map[string]int{}
		ids := map[string]bool{}
		for _, env := range je.h.Consume(t, schemas.TopicContacts) {
			if env.Workspace == ws && env.Key == ws+":"+c.ID && !ids[env.ID] {
				ids[env.ID] = true
				n[env.Type]++
			}
		}
		return n
	}
	want := map[string]int{schemas.TypeContactUpdated: 1, schemas.TypeContactAddedToList: 1,
		schemas.TypeContactJoinedList: 1, schemas.TypeContactRemovedFromList: 1}
	var got map[string]int
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if got = types(); fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
	}
	// contact.created of the test's own upsert is not published (the
	// store call does not publish), so exactly these four.
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("contact events %v, want %v", got, want)
	}
	// Redelivery: the same outputs' ids at most, nothing new.
	if _, err := je.stage.Handle(ctx, started); err != nil {
		t.Fatal(err)
	}
	if err := je.h.Publisher.Publish(ctx, schemas.TopicJourneys, started); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if got := types(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after redelivery: contact events %v, want %v", got, want)
	}
	if got := je.subjectsTo(addr); len(got) != 1 {
		t.Errorf("after redelivery: %d messages", len(got))
	}
}
