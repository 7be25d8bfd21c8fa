package journeys_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/schemas"
	"sendstream/sinks/journeys"
)

// fixture is a workspace with a template, a list and contacts, written
// straight into Postgres.
type fixture struct {
	pg       *pgxpool.Pool
	ws       string
	template string
	list     string
	store    *journeys.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pg := stack.PG(t)
	ctx := context.Background()
	f := &fixture{pg: pg, ws: schemas.NewID(), template: schemas.NewID(), list: schemas.NewID(), store: journeys.NewStore(pg, nil)}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO workspaces (id, name) VALUES ($1, 'journeys store test')`, []any{f.ws}},
		{`INSERT INTO templates (id, workspace_id, html) VALUES ($1, $2, '<p>hi</p>')`, []any{f.template, f.ws}},
		{`INSERT INTO lists (id, workspace_id, name) VALUES ($1, $2, 'vip')`, []any{f.list, f.ws}},
		{`INSERT INTO send_policies (id, workspace_id, key, kind) VALUES ($1, $2, 'marketing', 'marketing')`, []any{schemas.NewID(), f.ws}},
	} {
		if _, err := pg.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

var seq int64

func (f *fixture) contact(t *testing.T, email, status string) string {
	t.Helper()
	seq++
	id := schemas.NewID()
	if _, err := f.pg.Exec(context.Background(), `INSERT INTO contacts (id, workspace_id, seq, email, status) VALUES ($1, $2, $3, $4, $5)`,
		id, f.ws, seq, email, status); err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *fixture) def(t *testing.T, src string) schemas.JourneyDefinition {
	t.Helper()
	src = strings.ReplaceAll(strings.ReplaceAll(src, "TPL", f.template), "LIST", f.list)
	d, err := schemas.ParseJourney([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) start(t *testing.T, in journeys.StartInput) (journeys.Execution, error) {
	t.Helper()
	var e journeys.Execution
	err := pgx.BeginFunc(context.Background(), f.pg, func(tx pgx.Tx) error {
		var err error
		e, err = f.store.Start(context.Background(), tx, in)
		return err
	})
	return e, err
}

func TestCreateUpdateVersionsAndKeys(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := f.def(t, `{"name":"W","status":"active","trigger":{"type":"api_event"},"steps":[{"type":"send_email","templateId":"TPL","sendPolicy":"marketing"}]}`)
	j, key, err := f.store.Create(ctx, f.ws, d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, journeys.TriggerKeyPrefix) || len(key) < 40 || j.Version != 1 || j.Status != "active" || !j.HasTriggerKey {
		t.Fatalf("create: %+v key %q", j, key)
	}
	// Only the hash is stored.
	var stored []byte
	if err := f.pg.QueryRow(ctx, `SELECT trigger_key_hash FROM journeys WHERE id = $1`, j.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored), key) || string(stored) != string(journeys.HashTriggerKey(key)) {
		t.Fatalf("stored key column %x", stored)
	}
	if got, err := f.store.ByTriggerKey(ctx, key); err != nil || got.ID != j.ID {
		t.Fatalf("ByTriggerKey: %+v %v", got, err)
	}
	if _, err := f.store.ByTriggerKey(ctx, key+"x"); !errors.Is(err, journeys.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	// An event journey gets no key; switching it to api_event mints one.
	ev, evKey, err := f.store.Create(ctx, f.ws, f.def(t, `{"name":"E","trigger":{"type":"event","event":"signed_up"},"steps":[{"type":"exit"}]}`))
	if err != nil || evKey != "" || ev.HasTriggerKey || ev.TriggerEvent != "signed_up" || ev.Status != "draft" {
		t.Fatalf("event journey: %+v %q %v", ev, evKey, err)
	}
	ev2, minted, err := f.store.Update(ctx, f.ws, ev.ID, f.def(t, `{"name":"E2","trigger":{"type":"api_event"},"steps":[{"type":"exit"}]}`))
	if err != nil || minted == "" || ev2.Version != 2 || !ev2.HasTriggerKey || ev2.TriggerEvent != "" {
		t.Fatalf("update to api_event: %+v %q %v", ev2, minted, err)
	}
	// Updating keeps the key; versions stay as written.
	j2, again, err := f.store.Update(ctx, f.ws, j.ID, f.def(t, `{"name":"W2","status":"active","trigger":{"type":"api_event"},"steps":[{"type":"delay","duration":"1h"},{"type":"exit"}]}`))
	if err != nil || again != "" || j2.Version != 2 || j2.Name != "W2" {
		t.Fatalf("update: %+v %q %v", j2, again, err)
	}
	if got, err := f.store.ByTriggerKey(ctx, key); err != nil || got.ID != j.ID {
		t.Fatalf("key after update: %+v %v", got, err)
	}
	v1, err := f.store.Version(ctx, j.ID, 1)
	if err != nil || len(v1.Steps) != 1 || v1.Steps[0].Type != "send_email" {
		t.Fatalf("version 1: %+v %v", v1, err)
	}
	v2, err := f.store.Version(ctx, j.ID, 2)
	if err != nil || len(v2.Steps) != 2 || v2.Name != "W2" {
		t.Fatalf("version 2: %+v %v", v2, err)
	}
	// Another workspace sees nothing.
	if _, err := f.store.Get(ctx, schemas.NewID(), j.ID); !errors.Is(err, journeys.ErrNotFound) {
		t.Fatalf("other workspace: %v", err)
	}
}

func TestCreateRefusesMissingReferences(t *testing.T) {
	f := newFixture(t)
	d := f.def(t, `{"name":"R","trigger":{"type":"list_joined","listId":"nolist"},"steps":[
	  {"type":"send_email","templateId":"TPL","sendPolicy":"nopolicy"},
	  {"type":"send_email","templateId":"notpl","sendPolicy":"transactional"},
	  {"type":"branch","if":{"inList":"LIST"},"then":[{"type":"add_to_list","listId":"nolist"}]}]}`)
	_, _, err := f.store.Create(context.Background(), f.ws, d)
	var errs schemas.JourneyErrors
	if !errors.As(err, &errs) {
		t.Fatalf("err %v, want JourneyErrors", err)
	}
	want := []string{
		"steps[0].sendPolicy: no send policy with key or id nopolicy in this workspace",
		"steps[1].templateId: no template notpl in this workspace",
		"steps[2].then[0].listId: no list nolist in this workspace",
		"trigger.listId: no list nolist in this workspace",
	}
	if len(errs) != len(want) {
		t.Fatalf("errors %v, want %q", errs, want)
	}
	for i, e := range errs {
		if e.Error() != want[i] {
			t.Errorf("error %d: %q, want %q", i, e.Error(), want[i])
		}
	}
	var n int
	if err := f.pg.QueryRow(context.Background(), `SELECT count(*) FROM journeys WHERE workspace_id = $1`, f.ws).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d journeys stored after a refusal (%v)", n, err)
	}
}

func TestStatusTransitions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	j, _, err := f.store.Create(ctx, f.ws, f.def(t, `{"name":"S","trigger":{"type":"api_event"},"steps":[{"type":"exit"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var se *journeys.StatusError
	if _, err := f.store.SetStatus(ctx, f.ws, j.ID, "paused"); !errors.As(err, &se) {
		t.Fatalf("pause a draft: %v", err)
	}
	for _, st := range []string{"active", "active", "paused", "active"} {
		if got, err := f.store.SetStatus(ctx, f.ws, j.ID, st); err != nil || got.Status != st {
			t.Fatalf("to %s: %+v %v", st, got, err)
		}
	}
	c := f.contact(t, "s@example.com", "ACTIVE")
	e, err := f.start(t, journeys.StartInput{Workspace: f.ws, JourneyID: j.ID, Trigger: "api_event", ContactID: c, ExecutionID: schemas.NewID()})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.store.SetStatus(ctx, f.ws, j.ID, "archived"); err != nil || got.Status != "archived" {
		t.Fatalf("archive: %+v %v", got, err)
	}
	rows, err := f.store.Executions(ctx, f.ws, j.ID, "", 10)
	if err != nil || len(rows) != 1 || rows[0].ID != e.ID || rows[0].State != journeys.StateCancelled || rows[0].FinishedAt == nil {
		t.Fatalf("executions after archive: %+v %v", rows, err)
	}
	if _, err := f.store.SetStatus(ctx, f.ws, j.ID, "active"); !errors.Is(err, journeys.ErrArchived) {
		t.Fatalf("activate archived: %v", err)
	}
	if _, _, err := f.store.Update(ctx, f.ws, j.ID, f.def(t, `{"name":"S","trigger":{"type":"api_event"},"steps":[{"type":"exit"}]}`)); !errors.Is(err, journeys.ErrArchived) {
		t.Fatalf("update archived: %v", err)
	}
	if _, err := f.store.SetStatus(ctx, f.ws, schemas.NewID(), "active"); !errors.Is(err, journeys.ErrNotFound) {
		t.Fatalf("unknown journey: %v", err)
	}
}

// TestStartChecksAndReentry: every refusal of Start, the three re-entry
// settings, Finish releasing once_at_a_time, a retried start returning
// the same execution, and running executions keeping their version.
func TestStartChecksAndReentry(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mk := func(reentry, status string) journeys.Journey {
		j, _, err := f.store.Create(ctx, f.ws, f.def(t, `{"name":"R","status":"`+status+`","reentry":"`+reentry+`","trigger":{"type":"api_event"},"steps":[{"type":"delay","duration":"1h"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	active := f.contact(t, "a@example.com", "ACTIVE")
	f.contact(t, "u@example.com", "UNSUBSCRIBED")
	in := func(j journeys.Journey, email string) journeys.StartInput {
		return journeys.StartInput{Workspace: f.ws, JourneyID: j.ID, Trigger: "api_event", Email: email, ExecutionID: schemas.NewID(),
			Data: json.RawMessage(`{"plan":"pro"}`)}
	}
	once := mk("once", "active")
	for _, c := range []struct {
		in   journeys.StartInput
		want error
	}{
		{in(mk("once", "draft"), "a@example.com"), journeys.ErrNotActive},
		{journeys.StartInput{Workspace: f.ws, JourneyID: once.ID, Trigger: "event", Email: "a@example.com", ExecutionID: schemas.NewID()}, journeys.ErrWrongTrigger},
		{in(once, "nobody@example.com"), journeys.ErrContactNotFound},
		{in(once, "u@example.com"), journeys.ErrContactNotActive},
		{journeys.StartInput{Workspace: schemas.NewID(), JourneyID: once.ID, Trigger: "api_event", Email: "a@example.com", ExecutionID: schemas.NewID()}, journeys.ErrNotFound},
	} {
		if _, err := f.start(t, c.in); !errors.Is(err, c.want) {
			t.Errorf("start %+v: %v, want %v", c.in, err, c.want)
		}
	}
	first := in(once, "a@example.com")
	e, err := f.start(t, first)
	if err != nil || e.ContactID != active || e.Position != "0" || e.Version != 1 || e.Existing {
		t.Fatalf("start: %+v %v", e, err)
	}
	// A retried start with the same id is the same execution.
	if again, err := f.start(t, first); err != nil || !again.Existing || again.ID != e.ID || string(again.Data) != `{"plan": "pro"}` {
		t.Fatalf("retried start: %+v %v", again, err)
	}
	if _, err := f.start(t, in(once, "a@example.com")); !errors.Is(err, journeys.ErrReentry) {
		t.Fatalf("once, second start: %v", err)
	}
	// once_at_a_time: refused while running, allowed after Finish.
	oat := mk("once_at_a_time", "active")
	e1, err := f.start(t, in(oat, "a@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.start(t, in(oat, "a@example.com")); !errors.Is(err, journeys.ErrReentry) {
		t.Fatalf("once_at_a_time while running: %v", err)
	}
	finish := func(id string) bool {
		var ok bool
		if err := pgx.BeginFunc(ctx, f.pg, func(tx pgx.Tx) error {
			var err error
			ok, err = f.store.Finish(ctx, tx, f.ws, id, journeys.StateCompleted, nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !finish(e1.ID) || finish(e1.ID) {
		t.Fatal("Finish: want true once, then false")
	}
	if _, err := f.start(t, in(oat, "a@example.com")); err != nil {
		t.Fatalf("once_at_a_time after finish: %v", err)
	}
	// always: every start runs, concurrently with the others.
	always := mk("always", "active")
	for i := 0; i < 3; i++ {
		if _, err := f.start(t, in(always, "a@example.com")); err != nil {
			t.Fatalf("always #%d: %v", i, err)
		}
	}
	// A new version leaves the running execution on version 1; new starts
	// take version 2.
	if _, _, err := f.store.Update(ctx, f.ws, always.ID, f.def(t, `{"name":"R","status":"active","reentry":"always","trigger":{"type":"api_event"},"steps":[{"type":"exit"}]}`)); err != nil {
		t.Fatal(err)
	}
	e2, err := f.start(t, in(always, "a@example.com"))
	if err != nil || e2.Version != 2 {
		t.Fatalf("start on version 2: %+v %v", e2, err)
	}
	rows, err := f.store.Executions(ctx, f.ws, always.ID, journeys.StateActive, 100)
	if err != nil || len(rows) != 4 {
		t.Fatalf("executions: %d %v", len(rows), err)
	}
	versions := map[int]int{}
	for _, r := range rows {
		versions[r.Version]++
		wantType := map[int]string{1: "delay", 2: "exit"}[r.Version]
		if r.StepType != wantType || r.Position != "0" || r.Email != "a@example.com" {
			t.Errorf("row %+v", r)
		}
	}
	if versions[1] != 3 || versions[2] != 1 {
		t.Fatalf("versions %v", versions)
	}
	st, err := f.store.Stats(ctx, f.ws, always.ID)
	if err != nil || st.Entered != 4 || st.Active != 4 || st.Completed != 0 {
		t.Fatalf("stats %+v %v", st, err)
	}
	if _, err := f.store.Stats(ctx, schemas.NewID(), always.ID); !errors.Is(err, journeys.ErrNotFound) {
		t.Fatalf("stats of another workspace: %v", err)
	}
	// The announcement is derived from the execution.
	env := journeys.StartedEnvelope(e, "req1")
	var p schemas.JourneyExecutionStarted
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if env.ID != schemas.JourneyStartedEnvelopeID(e.ID) || env.Key != f.ws+":"+active || env.Type != schemas.TypeJourneyExecutionStarted ||
		p.ExecutionID != e.ID || p.JourneyID != once.ID || p.Position != "0" || string(p.Data) != `{"plan":"pro"}` || p.StartedAt.Sub(e.StartedAt) != 0 {
		t.Fatalf("envelope %+v payload %+v", env, p)
	}
}
