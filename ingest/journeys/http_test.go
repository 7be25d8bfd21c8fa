package journeys_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/deploy/stack"
	"sendstream/ingest"
	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/journeys"
	"sendstream/schemas"
	sj "sendstream/sinks/journeys"
)

const triggerPath = "/api/public/journeys/trigger"

// env is the real server with the trigger route, the contacts store whose
// outbox carries the announcements, and a workspace.
type env struct {
	h        *ingesttest.Harness
	store    *sj.Store
	contacts *contacts.Store
	ws, key  string
	seq      atomic.Int64
}

func start(t *testing.T, o ingesttest.WorkspaceOpts) *env {
	t.Helper()
	pg := stack.PG(t)
	cs := contacts.NewStore(pg)
	t.Cleanup(cs.Close)
	store := sj.NewStore(pg, nil)
	// As the server: starts on a journey beginning with a wait are their
	// own timers, of a scope no test process relays.
	h := ingesttest.Start(t, journeys.Routes(journeys.Deps{Store: store, Outbox: cs, WakeScope: testScope})...)
	ws, key := h.NewWorkspace(t, o)
	t.Cleanup(func() { // nothing relays testScope: its wake-ups go
		if _, err := pg.Exec(context.Background(), `DELETE FROM journey_wakes WHERE execution_id IN (SELECT id FROM journey_executions WHERE workspace_id = $1)`, ws); err != nil {
			t.Error(err)
		}
	})
	return &env{h: h, store: store, contacts: cs, ws: ws, key: key}
}

// contact inserts a contact with a status straight into Postgres.
func (e *env) contact(t *testing.T, email, status string) string {
	t.Helper()
	id := schemas.NewID()
	if _, err := e.h.PG.Exec(context.Background(), `INSERT INTO contacts (id, workspace_id, seq, email, status) VALUES ($1, $2, $3, $4, $5)`,
		id, e.ws, e.seq.Add(1), email, status); err != nil {
		t.Fatal(err)
	}
	return id
}

// journey creates a journey from a file body and returns it with its key.
func (e *env) journey(t *testing.T, ws, src string) (sj.Journey, string) {
	t.Helper()
	d, err := schemas.ParseJourney([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	j, key, err := e.store.Create(context.Background(), ws, d)
	if err != nil {
		t.Fatal(err)
	}
	return j, key
}

func apiJourney(status, reentry string) string {
	return `{"name":"T","status":"` + status + `","reentry":"` + reentry + `","trigger":{"type":"api_event"},"steps":[{"type":"delay","duration":"1h"}]}`
}

// trigger sends one trigger call; key "" sends no Authorization, tk "" no
// X-Trigger-Key.
func (e *env) trigger(t *testing.T, key, tk string, body any) (int, []byte) {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest("POST", e.h.URL+triggerPath, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if tk != "" {
		req.Header.Set(journeys.HeaderTriggerKey, tk)
	}
	resp, data := e.h.DoRequest(req)
	return resp.StatusCode, data
}

type outcome struct {
	Success     bool   `json:"success"`
	ExecutionID string `json:"executionId"`
	JourneyID   string `json:"journeyId"`
	ContactID   string `json:"contactId"`
}

func wantError(t *testing.T, what string, st int, b []byte, status int, code string) {
	t.Helper()
	var eb ingest.ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil || st != status || eb.Code != code || eb.Error == "" {
		t.Errorf("%s: %d %s, want %d %s", what, st, b, status, code)
	}
}

func (e *env) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := e.h.PG.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTriggerStartsAnExecution: the success row, with the execution, its
// data, the announcement on the journeys topic (the outbox row gone after
// the ack) and the request log naming the run.
func TestTriggerStartsAnExecution(t *testing.T) {
	e := start(t, ingesttest.WorkspaceOpts{})
	j, tk := e.journey(t, e.ws, apiJourney("active", "always"))
	cid := e.contact(t, "ann@example.com", "ACTIVE")
	st, b := e.trigger(t, e.key, tk, map[string]any{"email": "  Ann@Example.com ", "data": map[string]any{"plan": "pro", "n": 3}})
	var o outcome
	if err := json.Unmarshal(b, &o); err != nil || st != 200 || !o.Success || o.ExecutionID == "" || o.JourneyID != j.ID || o.ContactID != cid {
		t.Fatalf("trigger: %d %s", st, b)
	}
	var data string
	var version int
	var state, pos string
	if err := e.h.PG.QueryRow(context.Background(), `SELECT trigger_data::text, version, state, position FROM journey_executions WHERE id = $1 AND journey_id = $2 AND contact_id = $3`,
		o.ExecutionID, j.ID, cid).Scan(&data, &version, &state, &pos); err != nil {
		t.Fatalf("execution row: %v", err)
	}
	if data != `{"n": 3, "plan": "pro"}` || version != 1 || state != "active" || pos != "0" {
		t.Fatalf("execution row: %s %d %s %s", data, version, state, pos)
	}
	var found *schemas.Envelope
	for _, env := range e.h.Consume(t, schemas.TopicJourneys) {
		if env.Workspace == e.ws {
			if found != nil {
				t.Fatalf("two announcements: %s and %s", found.ID, env.ID)
			}
			found = &env
		}
	}
	if found == nil {
		t.Fatal("no journey_execution.started.v1 on the journeys topic")
	}
	var p schemas.JourneyExecutionStarted
	if err := json.Unmarshal(found.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if found.Type != schemas.TypeJourneyExecutionStarted || found.ID != schemas.JourneyStartedEnvelopeID(o.ExecutionID) ||
		found.Key != e.ws+":"+cid || p.ExecutionID != o.ExecutionID || p.Email != "ann@example.com" || p.Trigger != "api_event" ||
		p.Position != "0" || p.Version != 1 || !bytes.Equal(p.Data, []byte(`{"n":3,"plan":"pro"}`)) || found.CausationID == "" {
		t.Fatalf("announcement %+v payload %+v data %s", found, p, p.Data)
	}
	// The ack deletes the outbox row (in the background).
	deadline := time.Now().Add(5 * time.Second)
	for e.count(t, `SELECT count(*) FROM contact_outbox WHERE workspace_id = $1`, e.ws) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the outbox row of a published announcement was not deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var logged bool
	for _, rl := range e.h.RequestLogs(t, e.ws) {
		if rl.Path == triggerPath && rl.Status == 200 && len(rl.Produced.JourneyRunIDs) == 1 && rl.Produced.JourneyRunIDs[0] == o.ExecutionID {
			logged = true
		}
	}
	if !logged {
		t.Error("the request log has no record of the trigger with its execution id")
	}
	// Without data: data is null.
	st, b = e.trigger(t, e.key, tk, map[string]any{"email": "ann@example.com"})
	if err := json.Unmarshal(b, &o); err != nil || st != 200 {
		t.Fatalf("without data: %d %s", st, b)
	}
	if n := e.count(t, `SELECT count(*) FROM journey_executions WHERE id = $1 AND trigger_data IS NULL`, o.ExecutionID); n != 1 {
		t.Fatalf("execution without data: %d rows with null data", n)
	}
}

// TestTriggerRefusals: every error row of spec 7.2 for the trigger but 429
// (TestTriggerRateLimit) and the race (TestTriggerRaceOnce).
func TestTriggerRefusals(t *testing.T) {
	e := start(t, ingesttest.WorkspaceOpts{})
	j, tk := e.journey(t, e.ws, apiJourney("active", "once"))
	e.contact(t, "a@example.com", "ACTIVE")
	e.contact(t, "unsub@example.com", "UNSUBSCRIBED")
	e.contact(t, "pending@example.com", "PENDING")
	body := map[string]any{"email": "a@example.com"}

	// 401: API key missing or invalid, trigger key missing or unknown.
	st, b := e.trigger(t, "", tk, body)
	wantError(t, "no API key", st, b, 401, "unauthorized")
	st, b = e.trigger(t, "ss_live_nope", tk, body)
	wantError(t, "invalid API key", st, b, 401, "unauthorized")
	st, b = e.trigger(t, e.key, "", body)
	wantError(t, "no trigger key", st, b, 401, "unauthorized")
	st, b = e.trigger(t, e.key, tk+"x", body)
	wantError(t, "unknown trigger key", st, b, 401, "unauthorized")
	st, b = e.trigger(t, e.key, tk, map[string]any{"email": "nobody@example.com"})
	wantError(t, "unknown contact", st, b, 404, "contact_not_found")
	// 401s are not logged: the 404's record (queued after them) arrives
	// and no 401 record is there.
	logs := e.h.ConsumeUntil(t, schemas.TopicRequestLog, 10*time.Second, func(envs []schemas.Envelope) bool {
		for _, env := range envs {
			if env.Workspace == e.ws && strings.Contains(string(env.Payload), `"status":404`) {
				return true
			}
		}
		return false
	})
	for _, env := range logs {
		if env.Workspace == e.ws && strings.Contains(string(env.Payload), `"status":401`) {
			t.Errorf("a 401 was logged: %s", env.Payload)
		}
	}
	// 404 never creates the contact.
	if n := e.count(t, `SELECT count(*) FROM contacts WHERE workspace_id = $1 AND email = 'nobody@example.com'`, e.ws); n != 0 {
		t.Fatal("the trigger created a contact")
	}

	// 403: keys of different workspaces.
	ws2, key2 := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	_, tk2 := e.journey(t, ws2, apiJourney("active", "once"))
	st, b = e.trigger(t, e.key, tk2, body)
	wantError(t, "trigger key of another workspace", st, b, 403, "workspace_mismatch")
	st, b = e.trigger(t, key2, tk, body)
	wantError(t, "API key of another workspace", st, b, 403, "workspace_mismatch")

	// 400: no email, a bad email, data not an object.
	for _, c := range []struct {
		body   string
		fields []string
	}{
		{`{}`, []string{"email"}},
		{`{"email":null,"data":{}}`, []string{"email"}},
		{`{"email":"not an address"}`, []string{"email"}},
		{`{"email":42}`, []string{"email"}},
		{`{"email":"a@example.com","data":[1]}`, []string{"data"}},
		{`{"data":"x"}`, []string{"email", "data"}},
	} {
		st, b := e.trigger(t, e.key, tk, c.body)
		var eb ingest.ErrorBody
		_ = json.Unmarshal(b, &eb)
		if st != 400 || eb.Code != "validation_error" || strings.Join(eb.Fields, ",") != strings.Join(c.fields, ",") {
			t.Errorf("%s: %d %s, want 400 validation_error fields %v", c.body, st, b, c.fields)
		}
	}
	st, b = e.trigger(t, e.key, tk, `[1]`)
	wantError(t, "array body", st, b, 400, "validation_error")

	// 413: over 64 KB.
	big := `{"email":"a@example.com","data":{"pad":"` + strings.Repeat("x", 64<<10) + `"}}`
	st, b = e.trigger(t, e.key, tk, big)
	wantError(t, "over 64 KB", st, b, 413, "PAYLOAD_TOO_LARGE")

	// 422: contact not ACTIVE.
	st, b = e.trigger(t, e.key, tk, map[string]any{"email": "unsub@example.com"})
	wantError(t, "unsubscribed contact", st, b, 422, "contact_not_active")
	st, b = e.trigger(t, e.key, tk, map[string]any{"email": "pending@example.com"})
	wantError(t, "pending contact", st, b, 422, "contact_not_active")

	// Success, then 409: once.
	if st, b := e.trigger(t, e.key, tk, body); st != 200 {
		t.Fatalf("first trigger: %d %s", st, b)
	}
	st, b = e.trigger(t, e.key, tk, body)
	wantError(t, "second trigger on a once journey", st, b, 409, "reentry_forbidden")

	// 422: not active (draft, paused, archived).
	ctx := context.Background()
	for _, status := range []string{"paused", "archived"} {
		if _, err := e.store.SetStatus(ctx, e.ws, j.ID, status); err != nil {
			t.Fatal(err)
		}
		st, b = e.trigger(t, e.key, tk, body)
		wantError(t, status+" journey", st, b, 422, "journey_not_active")
	}
	_, tkDraft := e.journey(t, e.ws, apiJourney("draft", "always"))
	st, b = e.trigger(t, e.key, tkDraft, body)
	wantError(t, "draft journey", st, b, 422, "journey_not_active")

	// 422: not an API Event journey any more (its trigger was changed),
	// at once although the key was just used (the endpoint caches what a
	// key names, never whether it may start).
	j3, tk3 := e.journey(t, e.ws, apiJourney("active", "always"))
	if st, b := e.trigger(t, e.key, tk3, body); st != 200 {
		t.Fatalf("trigger before the change: %d %s", st, b)
	}
	d, err := schemas.ParseJourney([]byte(`{"name":"T","status":"active","trigger":{"type":"event","event":"signed_up"},"steps":[{"type":"exit"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.Update(ctx, e.ws, j3.ID, d); err != nil {
		t.Fatal(err)
	}
	st, b = e.trigger(t, e.key, tk3, body)
	wantError(t, "event journey", st, b, 422, "not_api_event_journey")

	// 403: the workspace is suspended (the credential cache sees it within
	// its TTL).
	if err := e.h.Store.SetSuspended(ctx, e.ws, true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, b = e.trigger(t, e.key, tk, body)
		if st == 403 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantError(t, "suspended workspace", st, b, 403, "TEAM_SUSPENDED")
}

// TestTriggerRateLimit: 120 calls a minute, the 121st answers 429 with only
// "error".
func TestTriggerRateLimit(t *testing.T) {
	e := start(t, ingesttest.WorkspaceOpts{})
	_, tk := e.journey(t, e.ws, apiJourney("active", "always"))
	e.contact(t, "r@example.com", "ACTIVE")
	ingesttest.AwayFromMinuteEnd(t, 20*time.Second)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < journeys.LimitTrigger; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, _ := e.trigger(t, e.key, tk, map[string]any{"email": "r@example.com"}); st == 200 {
				ok.Add(1)
			}
		}()
		if i%16 == 15 {
			wg.Wait()
		}
	}
	wg.Wait()
	if ok.Load() != journeys.LimitTrigger {
		t.Fatalf("%d of %d calls within the limit succeeded", ok.Load(), journeys.LimitTrigger)
	}
	st, b := e.trigger(t, e.key, tk, map[string]any{"email": "r@example.com"})
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || st != 429 || len(m) != 1 || m["error"] == "" {
		t.Fatalf("call %d: %d %s, want 429 with only error", journeys.LimitTrigger+1, st, b)
	}
	if n := e.count(t, `SELECT count(*) FROM journey_executions WHERE workspace_id = $1`, e.ws); n != journeys.LimitTrigger {
		t.Fatalf("%d executions, want %d (always: one per accepted call)", n, journeys.LimitTrigger)
	}
}

// TestTriggerRaceOnce: many concurrent triggers for one contact on a once
// journey, through two server replicas, start exactly one execution and
// announce it once; the others answer 409. A once_at_a_time journey
// behaves the same while its execution runs.
func TestTriggerRaceOnce(t *testing.T) {
	e := start(t, ingesttest.WorkspaceOpts{})
	second := e.h.Second(t, ingesttest.Options{})
	for _, reentry := range []string{"once", "once_at_a_time"} {
		j, tk := e.journey(t, e.ws, apiJourney("active", reentry))
		cid := e.contact(t, reentry+"@example.com", "ACTIVE")
		const n = 40
		statuses := make([]int, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-gate
				url := e.h.URL
				if i%2 == 1 {
					url = second.URL
				}
				req, _ := http.NewRequest("POST", url+triggerPath, strings.NewReader(`{"email":"`+reentry+`@example.com"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+e.key)
				req.Header.Set(journeys.HeaderTriggerKey, tk)
				resp, err := e.h.Client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				statuses[i] = resp.StatusCode
			}(i)
		}
		close(gate)
		wg.Wait()
		counts := map[int]int{}
		for _, s := range statuses {
			counts[s]++
		}
		if counts[200] != 1 || counts[409] != n-1 {
			t.Fatalf("%s: answers %v, want one 200 and %d 409", reentry, counts, n-1)
		}
		if c := e.count(t, `SELECT count(*) FROM journey_executions WHERE journey_id = $1 AND contact_id = $2`, j.ID, cid); c != 1 {
			t.Fatalf("%s: %d executions, want 1", reentry, c)
		}
		announced := 0
		for _, env := range e.h.Consume(t, schemas.TopicJourneys) {
			if env.Workspace == e.ws && strings.Contains(string(env.Payload), j.ID) {
				announced++
			}
		}
		if announced != 1 {
			t.Fatalf("%s: %d announcements, want 1", reentry, announced)
		}
	}
}

// TestStartedAnnouncementSurvivesAFailedPublish: a start whose
// announcement was committed to the outbox but never published (the
// process died, or the publish failed) is published by the contacts relay
// under the same envelope id.
func TestStartedAnnouncementSurvivesAFailedPublish(t *testing.T) {
	e := start(t, ingesttest.WorkspaceOpts{})
	j, _ := e.journey(t, e.ws, apiJourney("active", "always"))
	e.contact(t, "relay@example.com", "ACTIVE")
	ctx := context.Background()
	var exec sj.Execution
	write := func(tx pgx.Tx) (err error) {
		exec, err = e.store.Start(ctx, tx, sj.StartInput{Workspace: e.ws, JourneyID: j.ID, Trigger: schemas.TriggerAPIEvent,
			Email: "relay@example.com", ExecutionID: schemas.NewID(), Data: json.RawMessage(`{"k":1}`)})
		return err
	}
	announce := func() []ingest.Message {
		return []ingest.Message{{Topic: schemas.TopicJourneys, Env: sj.StartedEnvelope(exec, "req")}}
	}
	// Committed, never published: Published is not called.
	if _, _, err := e.contacts.InOutbox(ctx, write, announce); err != nil {
		t.Fatal(err)
	}
	n, err := e.contacts.RelayWorkspaceOnce(ctx, e.h.Publisher, e.ws, 0, 100)
	if err != nil || n != 1 {
		t.Fatalf("relay: %d rows, %v", n, err)
	}
	var got []schemas.Envelope
	for _, env := range e.h.Consume(t, schemas.TopicJourneys) {
		if env.Workspace == e.ws {
			got = append(got, env)
		}
	}
	if len(got) != 1 || got[0].ID != schemas.JourneyStartedEnvelopeID(exec.ID) || got[0].Type != schemas.TypeJourneyExecutionStarted ||
		!strings.Contains(string(got[0].Payload), exec.ID) || !strings.Contains(string(got[0].Payload), `"data":{"k":1}`) {
		t.Fatalf("relayed %+v", got)
	}
	if c := e.count(t, `SELECT count(*) FROM contact_outbox WHERE workspace_id = $1`, e.ws); c != 0 {
		t.Fatalf("%d outbox rows left after the relay", c)
	}
}
