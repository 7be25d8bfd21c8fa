package journeys_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/admincli"
	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
	"sendstream/ingest/journeys"
	"sendstream/schemas"
	sj "sendstream/sinks/journeys"
)

// admin runs `admin args...` through admincli.Run against the real
// Postgres, on a pool of its own as `sendstream admin` opens (Run closes
// it): the decoded JSON object, or the error (stderr, exit 1).
func admin(t *testing.T, _ *pgxpool.Pool, args ...string) (map[string]any, error) {
	t.Helper()
	url := stack.ForTest(t).PostgresURL
	env := admincli.NewEnv(func(ctx context.Context) (*pgxpool.Pool, error) { return pgxpool.New(ctx, url) },
		func(context.Context) (driver.Conn, error) {
			return nil, errors.New("journey commands never need ClickHouse")
		}).WithTopicPrefix(func() (string, error) { return adminTestPrefix, nil })
	var out, errOut bytes.Buffer
	if err := admincli.Run(context.Background(), journeys.AdminCommands(), env, args, &out, &errOut); err != nil {
		if out.Len() != 0 {
			t.Fatalf("admin %v failed but printed %s", args, out.String())
		}
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil || strings.Count(strings.TrimSpace(out.String()), "\n") != 0 {
		t.Fatalf("admin %v: stdout is not one JSON object: %q", args, out.String())
	}
	return m, nil
}

// adminTestPrefix is the topic prefix the admin commands of these tests
// run under: their outbox rows must carry it as their scope.
const adminTestPrefix = "journeys-admin-test."

// exampleFile writes deploy/examples/<name> with its placeholders replaced.
func exampleFile(t *testing.T, name string, repl map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for k, v := range repl {
		s = strings.ReplaceAll(s, k, v)
	}
	if strings.Contains(s, "REPLACE_WITH") {
		t.Fatalf("%s: placeholders left", name)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "j.json")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAdminJourneyCommands: create, update, activate, pause, archive,
// executions and stats with the outputs DESIGN.md gives, on the examples
// of deploy/examples.
func TestAdminJourneyCommands(t *testing.T) {
	pg := stack.PG(t)
	ctx := context.Background()
	ws, _, err := auth.NewStore(pg).CreateWorkspace(ctx, auth.NewWorkspace{Name: "journey admin test"})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, ph := range []string{"WELCOME_TEMPLATE", "NUDGE_TEMPLATE", "CART_TEMPLATE", "DISCOUNT_TEMPLATE", "HELLO_TEMPLATE"} {
		id := schemas.NewID()
		if _, err := pg.Exec(ctx, `INSERT INTO templates (id, workspace_id, html) VALUES ($1, $2, '<p>x</p>')`, id, ws); err != nil {
			t.Fatal(err)
		}
		ids["REPLACE_WITH_"+ph+"_ID"] = id
	}
	for _, ph := range []string{"VIP_LIST", "NEWSLETTER_LIST"} {
		id := schemas.NewID()
		if _, err := pg.Exec(ctx, `INSERT INTO lists (id, workspace_id, name) VALUES ($1, $2, 'l')`, id, ws); err != nil {
			t.Fatal(err)
		}
		ids["REPLACE_WITH_"+ph+"_ID"] = id
	}
	if _, err := pg.Exec(ctx, `INSERT INTO send_policies (id, workspace_id, key, kind) VALUES ($1, $2, 'marketing', 'marketing')`, schemas.NewID(), ws); err != nil {
		t.Fatal(err)
	}

	// create: the api_event journey's key is shown; the others' is null.
	out, err := admin(t, pg, "journey", "create", "--workspace", ws, "--file", exampleFile(t, "journey-welcome.json", ids))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := out["id"].(string)
	key, _ := out["triggerKey"].(string)
	if len(out) != 2 || id == "" || !strings.HasPrefix(key, sj.TriggerKeyPrefix) {
		t.Fatalf("create: %v", out)
	}
	for _, ex := range []string{"journey-abandoned-cart.json", "journey-list-onboarding.json"} {
		out, err := admin(t, pg, "journey", "create", "--workspace", ws, "--file", exampleFile(t, ex, ids))
		if v, has := out["triggerKey"]; err != nil || !has || v != nil || out["id"] == "" {
			t.Fatalf("create %s: %v %v", ex, out, err)
		}
	}
	// A file with errors is refused with every one named.
	_, err = admin(t, pg, "journey", "create", "--workspace", ws, "--file",
		writeFile(t, `{"name":"x","trigger":{"type":"event"},"steps":[{"type":"delay","duration":"soon"},{"type":"send_email","templateId":"missing"}]}`))
	if err == nil || !strings.Contains(err.Error(), "trigger.event: required") || !strings.Contains(err.Error(), `steps[0].duration: want a positive duration`) {
		t.Fatalf("invalid file: %v", err)
	}
	_, err = admin(t, pg, "journey", "create", "--workspace", ws, "--file",
		writeFile(t, `{"name":"x","trigger":{"type":"api_event"},"steps":[{"type":"send_email","templateId":"t","subject":"Hi {% if data.vip %}VIP"}]}`))
	if err == nil || !strings.Contains(err.Error(), "steps[0].subject: Template error: ") {
		t.Fatalf("broken Liquid subject: %v", err)
	}
	_, err = admin(t, pg, "journey", "create", "--workspace", ws, "--file",
		writeFile(t, `{"name":"x","trigger":{"type":"api_event"},"steps":[{"type":"send_email","templateId":"missing"},{"type":"add_to_list","listId":"nolist"}]}`))
	if err == nil || !strings.Contains(err.Error(), "steps[0].templateId: no template missing in this workspace") ||
		!strings.Contains(err.Error(), "steps[1].listId: no list nolist in this workspace") {
		t.Fatalf("missing references: %v", err)
	}

	// A start on version 1, then update: version 2, status kept (the file
	// has none), the running execution stays on version 1.
	store := sj.NewStore(pg, nil)
	if _, err := pg.Exec(ctx, `INSERT INTO contacts (id, workspace_id, seq, email) VALUES ($1, $2, 1, 'c@example.com')`, schemas.NewID(), ws); err != nil {
		t.Fatal(err)
	}
	var exec sj.Execution
	if err := pgx.BeginFunc(ctx, pg, func(tx pgx.Tx) error {
		exec, err = store.Start(ctx, tx, sj.StartInput{Workspace: ws, JourneyID: id, Trigger: "api_event", Email: "c@example.com", ExecutionID: schemas.NewID()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// stats lists the current version's send_email steps before they run.
	perStep := func(out map[string]any) string { // keys sorted, as json.Marshal writes a map
		b, _ := json.Marshal(out["emailsPerStep"])
		return string(b)
	}
	out, err = admin(t, pg, "journey", "stats", "--workspace", ws, "--id", id)
	want := `[{"sent":0,"step":"0","suppressed":0,"templateId":"` + ids["REPLACE_WITH_WELCOME_TEMPLATE_ID"] + `","version":1},` +
		`{"sent":0,"step":"2.else.0","suppressed":0,"templateId":"` + ids["REPLACE_WITH_NUDGE_TEMPLATE_ID"] + `","version":1}]`
	if err != nil || perStep(out) != want || out["emailsSent"] != float64(0) {
		t.Fatalf("stats before a send: %v %v, want emailsPerStep %s", out, err, want)
	}
	// The engine records the first step as sent.
	if err := pgx.BeginFunc(ctx, pg, func(tx pgx.Tx) error {
		_, err := store.RecordStep(ctx, tx, sj.StepRun{ExecutionID: exec.ID, Address: "0", StepType: schemas.StepSendEmail,
			Outcome: schemas.StepOutcomeSent, MessageID: "m1", CauseID: "test", DoneAt: time.Now()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	out, err = admin(t, pg, "journey", "update", "--workspace", ws, "--id", id, "--file",
		writeFile(t, `{"name":"Welcome 2","trigger":{"type":"api_event"},"steps":[{"type":"exit"}]}`))
	if err != nil || len(out) != 2 || out["id"] != id || out["version"] != float64(2) {
		t.Fatalf("update: %v %v", out, err)
	}
	if j, _ := store.Get(ctx, ws, id); j.Status != "active" || j.Name != "Welcome 2" {
		t.Fatalf("after update: %+v", j)
	}
	out, err = admin(t, pg, "journey", "executions", "--workspace", ws, "--id", id)
	if err != nil {
		t.Fatal(err)
	}
	execs, _ := out["executions"].([]any)
	if len(execs) != 1 {
		t.Fatalf("executions: %v", out)
	}
	e0 := execs[0].(map[string]any)
	if e0["id"] != exec.ID || e0["state"] != "active" || e0["currentStep"] != "0" || e0["currentStepType"] != "send_email" ||
		e0["version"] != float64(1) || e0["startedAt"] == nil || e0["email"] != "c@example.com" {
		t.Fatalf("execution row: %v", e0)
	}
	if _, has := e0["nextWakeAt"]; !has {
		t.Fatalf("execution row without nextWakeAt: %v", e0)
	}
	out, err = admin(t, pg, "journey", "stats", "--workspace", ws, "--id", id)
	if err != nil || out["entered"] != float64(1) || out["active"] != float64(1) || out["completed"] != float64(0) || out["revenue"] != float64(0) {
		t.Fatalf("stats: %v %v", out, err)
	}
	// Version 2 has no send_email step; version 1's that sent is listed.
	want = `[{"sent":1,"step":"0","suppressed":0,"templateId":"` + ids["REPLACE_WITH_WELCOME_TEMPLATE_ID"] + `","version":1}]`
	if perStep(out) != want || out["emailsSent"] != float64(1) {
		t.Fatalf("stats after a send: %v, want emailsPerStep %s", out, want)
	}

	// Status commands.
	for _, c := range [][2]string{{"pause", "paused"}, {"activate", "active"}, {"archive", "archived"}} {
		out, err := admin(t, pg, "journey", c[0], "--workspace", ws, "--id", id)
		if err != nil || len(out) != 2 || out["id"] != id || out["status"] != c[1] {
			t.Fatalf("%s: %v %v", c[0], out, err)
		}
	}
	out, err = admin(t, pg, "journey", "executions", "--workspace", ws, "--id", id, "--state", "cancelled", "--limit", "5")
	if err != nil || len(out["executions"].([]any)) != 1 {
		t.Fatalf("cancelled executions after archive: %v %v", out, err)
	}
	out, err = admin(t, pg, "journey", "executions", "--workspace", ws, "--id", id, "--state", "active")
	if err != nil || len(out["executions"].([]any)) != 0 {
		t.Fatalf("active executions after archive: %v %v", out, err)
	}
	// The archive's cancellation is in the outbox under the deployment's
	// prefix, so that deployment's relay (and no other) publishes it.
	var scopes []string
	rows, err := pg.Query(context.Background(), `SELECT scope FROM contact_outbox WHERE workspace_id = $1 AND data->>'topic' = $2`, ws, schemas.TopicJourneys)
	if err == nil {
		scopes, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(scopes) != 1 || scopes[0] != adminTestPrefix {
		t.Fatalf("cancellations in the outbox: scopes %q (%v), want one with %q", scopes, err, adminTestPrefix)
	}
	if _, err := admin(t, pg, "journey", "activate", "--workspace", ws, "--id", id); err == nil || !strings.Contains(err.Error(), "archived") {
		t.Fatalf("activate archived: %v", err)
	}
	if _, err := admin(t, pg, "journey", "executions", "--workspace", ws, "--id", id, "--state", "sleeping"); err == nil {
		t.Fatal("an unknown --state was accepted")
	}
	if _, err := admin(t, pg, "journey", "stats", "--workspace", ws, "--id", schemas.NewID()); err == nil {
		t.Fatal("stats of an unknown journey succeeded")
	}
	if _, err := admin(t, pg, "journey", "create", "--workspace", schemas.NewID(), "--file", exampleFile(t, "journey-welcome.json", ids)); err == nil {
		t.Fatal("create in an unknown workspace succeeded")
	}
}
