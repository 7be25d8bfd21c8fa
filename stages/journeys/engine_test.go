package journeys_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
	"sendstream/sinks/timers"
	engine "sendstream/stages/journeys"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// recorder is the real timers plus a record of what was scheduled, so the
// test hands wake-ups to Handle itself under its clock.
type recorder struct {
	inner *timers.Timers
	mu    sync.Mutex
	envs  []schemas.Envelope
	at    []time.Time
}

func (r *recorder) Schedule(ctx context.Context, tx pgx.Tx, topic string, env schemas.Envelope, at time.Time) error {
	if err := r.inner.Schedule(ctx, tx, topic, env, at); err != nil {
		return err
	}
	r.mu.Lock()
	r.envs, r.at = append(r.envs, env), append(r.at, at)
	r.mu.Unlock()
	return nil
}

func (r *recorder) last(t *testing.T) (schemas.Envelope, time.Time) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.envs) == 0 {
		t.Fatal("nothing scheduled")
	}
	return r.envs[len(r.envs)-1], r.at[len(r.at)-1]
}

func (r *recorder) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.envs) }

// mailer is a fake Mailer (the transactional one is tested end to end in
// ingest/transactional): it records each request and fails the first
// failFirst calls after recording them, as a process dying between the
// claim and the step's commit would.
type mailer struct {
	mu        sync.Mutex
	keys      []string
	failFirst int
}

func (m *mailer) SendEmail(_ context.Context, r schemas.MailRequest) (schemas.MailResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys = append(m.keys, r.ExternalID)
	if m.failFirst > 0 {
		m.failFirst--
		return schemas.MailResult{}, errors.New("died after the claim")
	}
	id := schemas.MessageIDOf(r.Workspace, r.ExternalID)
	return schemas.MailResult{MessageID: id, Status: schemas.MessageQueued,
		Publish: []schemas.Envelope{{ID: id, Workspace: r.Workspace, Type: schemas.TypeTransactionalSend, Key: r.Workspace + ":" + id, Payload: []byte(`{}`)}}}, nil
}

type fixture struct {
	pg       *pgxpool.Pool
	ws       string
	template string
	store    *journeys.Store
	clock    *clock
	sched    *recorder
	mail     *mailer
	stage    *engine.Stage
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pg := stack.PG(t)
	ctx := context.Background()
	tm, err := timers.Start(ctx, pg, &pipelinetest.Publisher{}, timers.Config{Queue: "timers_test_" + schemas.NewID()[16:]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tm.Close() })
	f := &fixture{pg: pg, ws: schemas.NewID(), template: schemas.NewID(), clock: &clock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)},
		sched: &recorder{inner: tm}, mail: &mailer{}}
	f.store = journeys.NewStore(pg, f.clock.now)
	f.stage = engine.New(engine.Options{Store: f.store, Postgres: pg, Timers: f.sched, Mailer: f.mail, Now: f.clock.now, HoldRecheck: time.Minute})
	if _, err := pg.Exec(ctx, `INSERT INTO workspaces (id, name) VALUES ($1, 'journey engine test')`, f.ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Exec(ctx, `INSERT INTO templates (id, workspace_id, html) VALUES ($1, $2, '<p>hi</p>')`, f.template, f.ws); err != nil {
		t.Fatal(err)
	}
	return f
}

var seq int64

func (f *fixture) journey(t *testing.T, src string) string {
	t.Helper()
	d, err := schemas.ParseJourney([]byte(strings.ReplaceAll(src, "TPL", f.template)))
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := f.store.Create(context.Background(), f.ws, d)
	if err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// start creates a contact and starts an execution for it; it returns the
// started envelope.
func (f *fixture) start(t *testing.T, journey string, data string) schemas.Envelope {
	t.Helper()
	seq++
	email := schemas.NewID() + "@example.test"
	if _, err := f.pg.Exec(context.Background(), `INSERT INTO contacts (id, workspace_id, seq, email, status) VALUES ($1, $2, $3, $4, 'ACTIVE')`,
		schemas.NewID(), f.ws, seq, email); err != nil {
		t.Fatal(err)
	}
	var env schemas.Envelope
	err := pgx.BeginFunc(context.Background(), f.pg, func(tx pgx.Tx) error {
		e, err := f.store.Start(context.Background(), tx, journeys.StartInput{Workspace: f.ws, JourneyID: journey,
			Trigger: schemas.TriggerAPIEvent, Email: email, ExecutionID: schemas.NewID(), Data: json.RawMessage(data)})
		env = journeys.StartedEnvelope(e, "test")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func (f *fixture) handle(t *testing.T, env schemas.Envelope) []schemas.Envelope {
	t.Helper()
	out, err := f.stage.Handle(context.Background(), env)
	if err != nil {
		t.Fatalf("handle %s: %v", env.Type, err)
	}
	return out
}

// state is the execution's state, position and whether it waits.
func (f *fixture) state(t *testing.T, started schemas.Envelope) (string, string, bool) {
	t.Helper()
	var p schemas.JourneyExecutionStarted
	_ = json.Unmarshal(started.Payload, &p)
	var state, pos string
	var wake *time.Time
	if err := f.pg.QueryRow(context.Background(), `SELECT state, position, next_wake_at FROM journey_executions WHERE id = $1`, p.ExecutionID).
		Scan(&state, &pos, &wake); err != nil {
		t.Fatal(err)
	}
	return state, pos, wake != nil
}

// steps are the step addresses and outcomes of step-done envelopes.
func steps(t *testing.T, out []schemas.Envelope) []string {
	t.Helper()
	var s []string
	for _, env := range out {
		if env.Type != schemas.TypeJourneyStepDone {
			continue
		}
		var d schemas.JourneyStepDone
		if err := json.Unmarshal(env.Payload, &d); err != nil {
			t.Fatal(err)
		}
		s = append(s, d.Step+":"+d.Outcome+":"+d.Final)
	}
	return s
}

const waitThenBranch = `{"name":"W","status":"active","reentry":"always","trigger":{"type":"api_event"},
	"steps":[{"type":"delay","duration":"1h"},
	         {"type":"branch","if":{"property":"order.plan","op":"eq","value":"gold"},"then":[{"type":"exit"}]},
	         {"type":"send_email","templateId":"TPL"}]}`

// TestWaitPauseResumeArchive: a delay waits for its timer (an early
// wake-up waits again, another wake-up than its own changes nothing); a
// wake-up while the journey is paused holds the execution, which goes on
// once the journey is active; archiving ends executions, whose later
// wake-ups do nothing; a redelivered wake-up returns the same step
// envelopes and runs nothing again.
func TestWaitPauseResumeArchive(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	j := f.journey(t, waitThenBranch)
	t0 := f.clock.now()
	gold := f.start(t, j, `{"order":{"plan":"gold"}}`)
	if out := f.handle(t, gold); len(out) != 0 {
		t.Fatalf("started: outputs %v, want none (the delay waits)", steps(t, out))
	}
	wake, at := f.sched.last(t)
	if !at.Equal(t0.Add(time.Hour)) || wake.Type != schemas.TypeJourneyWake {
		t.Fatalf("wake-up %s at %s, want %s", wake.Type, at, t0.Add(time.Hour))
	}
	if st, pos, waiting := f.state(t, gold); st != "active" || pos != "0" || !waiting {
		t.Fatalf("after start: %s %s waiting=%v", st, pos, waiting)
	}
	// The started envelope again: still waiting, nothing scheduled anew.
	n := f.sched.count()
	f.handle(t, gold)
	if f.sched.count() != n {
		t.Fatalf("redelivered start scheduled %d timers", f.sched.count()-n)
	}
	// Early: waits again until due.
	f.clock.set(t0.Add(30 * time.Minute))
	if out := f.handle(t, wake); len(out) != 0 {
		t.Fatalf("early wake-up ran %v", steps(t, out))
	}
	if _, rearm := f.sched.last(t); !rearm.Equal(t0.Add(time.Hour)) {
		t.Errorf("early wake-up re-armed at %s", rearm)
	}
	// Paused: held.
	if _, err := f.store.SetStatus(ctx, f.ws, j, schemas.JourneyPaused); err != nil {
		t.Fatal(err)
	}
	f.clock.set(t0.Add(time.Hour + time.Second))
	if out := f.handle(t, wake); len(out) != 0 {
		t.Fatalf("paused journey ran %v", steps(t, out))
	}
	hold, holdAt := f.sched.last(t)
	if !holdAt.Equal(f.clock.now().Add(time.Minute)) || hold.ID == wake.ID {
		t.Fatalf("hold: %s at %s", hold.ID, holdAt)
	}
	if st, pos, _ := f.state(t, gold); st != "active" || pos != "0" {
		t.Fatalf("held: %s %s", st, pos)
	}
	// Active again: the hold's wake-up goes on, the branch takes then,
	// exit ends it.
	if _, err := f.store.SetStatus(ctx, f.ws, j, schemas.JourneyActive); err != nil {
		t.Fatal(err)
	}
	f.clock.set(holdAt)
	out := f.handle(t, hold)
	want := "[0:done: 1:then: 1.then.0:exited:exited]"
	if got := steps(t, out); strings.Join(got, " ") != strings.Trim(want, "[]") {
		t.Fatalf("resumed: %v, want %s", got, want)
	}
	if st, _, waiting := f.state(t, gold); st != "exited" || waiting {
		t.Fatalf("after exit: %s waiting=%v", st, waiting)
	}
	if len(f.mail.keys) != 0 {
		t.Errorf("exit did not stop the journey: mail %v", f.mail.keys)
	}
	// Redelivered: the same envelopes, nothing run again.
	again := f.handle(t, hold)
	if len(again) != len(out) {
		t.Fatalf("redelivered: %d outputs, want %d", len(again), len(out))
	}
	for i := range out {
		if again[i].ID != out[i].ID || string(again[i].Payload) != string(out[i].Payload) {
			t.Errorf("redelivered output %d differs: %s / %s", i, again[i].Payload, out[i].Payload)
		}
	}
	// The first wake-up, late: nothing (the execution moved on).
	if out := f.handle(t, wake); len(out) != 0 {
		t.Errorf("stale wake-up ran %v", steps(t, out))
	}

	// Archive ends a waiting execution; its wake-up does nothing.
	silver := f.start(t, j, `{"order":{"plan":"silver"}}`)
	f.handle(t, silver)
	w2, _ := f.sched.last(t)
	if _, err := f.store.SetStatus(ctx, f.ws, j, schemas.JourneyArchived); err != nil {
		t.Fatal(err)
	}
	f.clock.set(f.clock.now().Add(2 * time.Hour))
	if out := f.handle(t, w2); len(out) != 0 {
		t.Errorf("archived journey ran %v", steps(t, out))
	}
	if st, _, _ := f.state(t, silver); st != "cancelled" {
		t.Errorf("archived execution %s, want cancelled", st)
	}
}

// TestSendRetriedAfterCrashOneMessage: the Mailer claims the message and
// the process dies before the step commits (the first call fails after the
// claim); the retry asks for the same idempotency key, the step is
// recorded once, and the send envelope comes out. A redelivery after the
// commit asks again with that key (the transactional path republishes
// only a still-queued message) and returns the same step envelope.
func TestSendRetriedAfterCrashOneMessage(t *testing.T) {
	f := newFixture(t)
	j := f.journey(t, `{"name":"S","status":"active","reentry":"always","trigger":{"type":"api_event"},
		"steps":[{"type":"send_email","templateId":"TPL"}]}`)
	started := f.start(t, j, `{}`)
	f.mail.failFirst = 1
	if _, err := f.stage.Handle(context.Background(), started); err == nil {
		t.Fatal("Handle succeeded although the Mailer failed")
	}
	if st, pos, _ := f.state(t, started); st != "active" || pos != "0" {
		t.Fatalf("after the failed send: %s %s", st, pos)
	}
	out := f.handle(t, started)
	if len(out) != 2 || out[0].Type != schemas.TypeTransactionalSend || strings.Join(steps(t, out), " ") != "0:sent:completed" {
		t.Fatalf("retry: %v", out)
	}
	again := f.handle(t, started)
	if len(again) != 2 || again[0].ID != out[0].ID || again[1].ID != out[1].ID {
		t.Fatalf("redelivery: %v", again)
	}
	if len(f.mail.keys) != 3 || f.mail.keys[0] != f.mail.keys[1] || f.mail.keys[1] != f.mail.keys[2] {
		t.Fatalf("idempotency keys %v, want one key three times", f.mail.keys)
	}
	var p schemas.JourneyExecutionStarted
	_ = json.Unmarshal(started.Payload, &p)
	if want := schemas.JourneySendExternalID(p.ExecutionID, "0"); f.mail.keys[0] != want {
		t.Errorf("key %s, want %s", f.mail.keys[0], want)
	}
	var n int
	if err := f.pg.QueryRow(context.Background(), `SELECT count(*) FROM journey_step_runs WHERE execution_id = $1`, p.ExecutionID).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d step runs (%v), want 1", n, err)
	}
}
