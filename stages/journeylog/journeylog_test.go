package journeylog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"

	"sendstream/deploy/stack"
	"sendstream/pipeline"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
	"sendstream/sinks/timers"
	"sendstream/stages/journeylog"
	engine "sendstream/stages/journeys"
)

// mailer is a fake Mailer beside the real engine (the transactional path
// is tested end to end in ingest/transactional): it accepts every email
// except those to refuse, which it refuses as suppressed.
type mailer struct {
	mu     sync.Mutex
	refuse map[string]bool
}

func (m *mailer) SendEmail(_ context.Context, r schemas.MailRequest) (schemas.MailResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refuse[r.To] {
		return schemas.MailResult{RefusedCode: "RECIPIENT_SUPPRESSED", Refused: "the recipient is suppressed"}, nil
	}
	id := schemas.MessageIDOf(r.Workspace, r.ExternalID)
	return schemas.MailResult{MessageID: id, Status: schemas.MessageQueued}, nil
}

// journey: a send, a branch whose then arm sends another template and
// exits, and a last send.
const journey = `{"name":"log","status":"active","reentry":"always","trigger":{"type":"api_event"},
	"steps":[{"type":"send_email","templateId":"TPL1"},
	         {"type":"branch","if":{"property":"plan","op":"eq","value":"gold"},
	          "then":[{"type":"send_email","templateId":"TPL2"},{"type":"exit"}]},
	         {"type":"send_email","templateId":"TPL1"}]}`

// event is one journey_events row as the test reads it.
type event struct {
	Event, Step, StepType, Outcome, Final, Trigger string
	HasMessage                                     bool
	Value                                          float64
}

func (e event) String() string {
	return fmt.Sprintf("%s %s %s %s %s %s msg=%v %g", e.Event, e.Step, e.StepType, e.Outcome, e.Final, e.Trigger, e.HasMessage, e.Value)
}

// TestStepsLoggedOnceAndEmailsPerStep runs three executions through the
// real engine on Postgres (gold takes the branch and exits, plain
// completes, a suppressed contact's sends are refused), hands every
// envelope to the journeylog stages twice (in one batch, and again to a
// new stage after the first flush, as after a crash) with a conversion,
// and reads ClickHouse: exactly one row per start, step, completion, exit
// and conversion. Stats count the emails per step from the engine's step
// records and agree with ClickHouse's sent steps.
func TestStepsLoggedOnceAndEmailsPerStep(t *testing.T) {
	ctx := context.Background()
	pg, ch := stack.PG(t), stack.CH(t)
	tm, err := timers.Start(ctx, pg, &pipelinetest.Publisher{}, timers.Config{Queue: "timers_test_" + schemas.NewID()[:8]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tm.Close() })
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store := journeys.NewStore(pg, clock)
	ws, tpl1, tpl2 := schemas.NewID(), schemas.NewID(), schemas.NewID()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO workspaces (id, name) VALUES ($1, 'journeylog test')`, []any{ws}},
		{`INSERT INTO templates (id, workspace_id, html) VALUES ($1, $2, '<p>1</p>')`, []any{tpl1, ws}},
		{`INSERT INTO templates (id, workspace_id, html) VALUES ($1, $2, '<p>2</p>')`, []any{tpl2, ws}},
	} {
		if _, err := pg.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	def, err := schemas.ParseJourney([]byte(strings.NewReplacer("TPL1", tpl1, "TPL2", tpl2).Replace(journey)))
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := store.Create(ctx, ws, def)
	if err != nil {
		t.Fatal(err)
	}
	m := &mailer{refuse: map[string]bool{}}
	eng := engine.New(engine.Options{Store: store, Postgres: pg, Timers: tm, Mailer: m, Now: clock})

	// Three executions: gold, plain, suppressed.
	var envs []schemas.Envelope
	execs := map[string]string{}
	for i, who := range []string{"gold", "plain", "suppressed"} {
		email := who + "-" + schemas.NewID() + "@example.test"
		if who == "suppressed" {
			m.refuse[email] = true
		}
		if _, err := pg.Exec(ctx, `INSERT INTO contacts (id, workspace_id, seq, email, status) VALUES ($1, $2, $3, $4, 'ACTIVE')`,
			schemas.NewID(), ws, i+1, email); err != nil {
			t.Fatal(err)
		}
		var started schemas.Envelope
		err := pgx.BeginFunc(ctx, pg, func(tx pgx.Tx) error {
			e, err := store.Start(ctx, tx, journeys.StartInput{Workspace: ws, JourneyID: j.ID, Trigger: schemas.TriggerAPIEvent,
				Email: email, ExecutionID: schemas.NewID(), Data: json.RawMessage(`{"plan":"` + who + `"}`)})
			started = journeys.StartedEnvelope(e, "test")
			execs[who] = e.ID
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := eng.Handle(ctx, started)
		if err != nil {
			t.Fatal(err)
		}
		envs = append(append(envs, started), out...)
	}
	// The gold execution converts (an envelope as journeymatch returns
	// it), and envelopes the stages ignore.
	envs = append(envs,
		schemas.JourneyWebhookEnvelope(ws, schemas.TypeWebhookJourneyConverted, "ev", schemas.JourneyWebhookData{
			JourneyID: j.ID, ExecutionID: execs["gold"], Version: 1, ContactID: "c", Event: "purchase", GoalType: "purchase",
			Value: "42.5", Currency: "EUR", OccurredAt: now}),
		schemas.JourneyWebhookEnvelope(ws, schemas.TypeWebhookJourneyStarted, "ev", schemas.JourneyWebhookData{
			JourneyID: j.ID, ExecutionID: execs["gold"], Version: 1, OccurredAt: now}),
		schemas.JourneyWakeEnvelope("wake", ws, ws+":c", "x", schemas.JourneyWake{ExecutionID: execs["plain"], Position: "0", DueAt: now}))

	deliver := func(twice bool) {
		t.Helper()
		st := map[string]*journeylog.Stage{}
		for _, name := range []string{journeylog.NameStarted, journeylog.NameSteps, journeylog.NameConversions} {
			s, err := journeylog.New(ctx, pipeline.Resources{ClickHouse: ch}, name, journeylog.Config{})
			if err != nil {
				t.Fatal(err)
			}
			st[name] = s
		}
		for range map[bool]int{false: 1, true: 2}[twice] {
			for _, env := range envs {
				name := journeylog.NameConversions
				switch env.Type {
				case schemas.TypeJourneyExecutionStarted, schemas.TypeJourneyWake:
					name = journeylog.NameStarted
				case schemas.TypeJourneyStepDone:
					name = journeylog.NameSteps
				case schemas.TypeTransactionalSend:
					continue
				}
				if out, err := st[name].Handle(ctx, env); err != nil || len(out) != 0 {
					t.Fatalf("%s: %v, %d outputs", env.Type, err, len(out))
				}
			}
		}
		for _, s := range st {
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(final string) uint64 {
		t.Helper()
		var n uint64
		if err := ch.QueryRow(ctx, `SELECT count() FROM journey_events `+final+` WHERE workspace = ?`, ws).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const total = 7 + 5 + 5 // rows of gold, plain and suppressed, below
	deliver(true)           // every envelope twice in one batch: one row each
	if n := count(""); n != total {
		t.Fatalf("%d rows after one batch, want %d", n, total)
	}
	deliver(false) // again after the flush, by a new stage: copies a merge collapses
	if n := count("FINAL"); n != total {
		t.Fatalf("%d rows as merged (FINAL), want %d", n, total)
	}

	want := map[string][]string{
		"gold": {"converted      msg=false 42.5", "exited    exited  msg=false 0", "started     api_event msg=false 0",
			"step 0 send_email sent   msg=true 0", "step 1 branch then   msg=false 0", "step 1.then.0 send_email sent   msg=true 0",
			"step 1.then.1 exit exited exited  msg=false 0"},
		"plain": {"completed    completed  msg=false 0", "started     api_event msg=false 0", "step 0 send_email sent   msg=true 0",
			"step 1 branch else   msg=false 0", "step 2 send_email sent completed  msg=true 0"},
		"suppressed": {"completed    completed  msg=false 0", "started     api_event msg=false 0",
			"step 0 send_email suppressed   msg=false 0", "step 1 branch else   msg=false 0",
			"step 2 send_email suppressed completed  msg=false 0"},
	}
	for who, id := range execs {
		got := rows(t, ch, ws, id)
		if !slices.Equal(got, want[who]) {
			t.Errorf("%s: rows\n%s\nwant\n%s", who, strings.Join(got, "\n"), strings.Join(want[who], "\n"))
		}
	}

	// Stats: emails per step from the engine's step records.
	st, err := store.Stats(ctx, ws, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantSteps := []journeys.StepEmails{{Version: 1, Step: "0", TemplateID: tpl1, Sent: 2, Suppressed: 1},
		{Version: 1, Step: "1.then.0", TemplateID: tpl2, Sent: 1}, {Version: 1, Step: "2", TemplateID: tpl1, Sent: 1, Suppressed: 1}}
	if !slices.Equal(st.EmailsPerStep, wantSteps) || st.EmailsSent != 4 || st.Entered != 3 || st.Completed != 2 || st.Exited != 1 {
		t.Fatalf("stats %+v", st)
	}
	// ClickHouse's sent steps agree.
	var sent uint64
	q := `SELECT count() FROM (SELECT id, outcome FROM journey_events WHERE workspace = ? AND journey_id = ? AND event = 'step'
	       AND step_type = 'send_email' LIMIT 1 BY id) WHERE outcome = 'sent'`
	if err := ch.QueryRow(ctx, q, ws, j.ID).Scan(&sent); err != nil || sent != uint64(st.EmailsSent) {
		t.Fatalf("ClickHouse: %d sent (%v), stats %d", sent, err, st.EmailsSent)
	}

	// A new version lists its own send_email steps, zero until they run,
	// after the old version's that ran.
	def2, err := schemas.ParseJourney([]byte(strings.NewReplacer("TPL1", tpl2).Replace(
		`{"name":"log","status":"active","reentry":"always","trigger":{"type":"api_event"},"steps":[{"type":"delay","duration":"1h"},{"type":"send_email","templateId":"TPL1"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Update(ctx, ws, j.ID, def2); err != nil {
		t.Fatal(err)
	}
	st, err = store.Stats(ctx, ws, j.ID)
	wantSteps = append(wantSteps, journeys.StepEmails{Version: 2, Step: "1", TemplateID: tpl2})
	if err != nil || !slices.Equal(st.EmailsPerStep, wantSteps) || st.EmailsSent != 4 {
		t.Fatalf("stats after update %+v %v", st, err)
	}

	// Malformed envelopes are permanent errors.
	s, err := journeylog.New(ctx, pipeline.Resources{ClickHouse: ch}, journeylog.NameSteps, journeylog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{`{"at":"bad"}`, `{"executionId":"e","journeyId":"j","step":"0","at":"1960-01-01T00:00:00Z"}`, `{"journeyId":"j","step":"0","at":"2026-01-01T00:00:00Z"}`} {
		if _, err := s.Handle(ctx, schemas.Envelope{ID: "x", Workspace: ws, Type: schemas.TypeJourneyStepDone, Payload: json.RawMessage(p)}); !pipeline.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent error", p, err)
		}
	}
}

// rows are the deduplicated journey_events rows of execution id, sorted.
func rows(t *testing.T, ch driver.Conn, ws, id string) []string {
	t.Helper()
	q := `SELECT event, step, step_type, outcome, final, trigger_type, message_id != '', value FROM journey_events
	       WHERE workspace = ? AND execution_id = ? LIMIT 1 BY id`
	r, err := ch.Query(context.Background(), q, ws, id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for r.Next() {
		var e event
		var msg uint8
		if err := r.Scan(&e.Event, &e.Step, &e.StepType, &e.Outcome, &e.Final, &e.Trigger, &msg, &e.Value); err != nil {
			t.Fatal(err)
		}
		e.HasMessage = msg == 1
		out = append(out, e.String())
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
