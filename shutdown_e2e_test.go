package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/pipeline"
	"sendstream/schemas"
)

// nestedLoop is the template of issue 23's first defect: 10^10 iterations.
const nestedLoop = `{% for a in (1..100000) %}{% for b in (1..100000) %}x{% endfor %}{% endfor %}`

// SIGTERM while a render is stuck both on the request path (a validate)
// and in the delivery stage (an envelope of the same template) ends the
// process within SENDSTREAM_SHUTDOWN_TIMEOUT. The render budgets are raised
// so far here that both renders would run for hours: what is tested is the
// bound of the drain alone. Before it, the stage's Close waited for the
// stuck render and the process never exited.
func TestSIGTERMDuringStuckRenderExitsWithinBound(t *testing.T) {
	e := newE2E(t)
	const bound = 4 * time.Second
	srv, base := e.serverWith(t, "serve",
		"SENDSTREAM_SHUTDOWN_TIMEOUT="+bound.String(),
		"SENDSTREAM_RENDER_TIMEOUT=10h",
		"SENDSTREAM_RENDER_MAX_ITERATIONS=1000000000000000",
		"SENDSTREAM_RENDER_MAX_OUTPUT_BYTES=1000000000000")
	var ws workspace
	e.admin(t, &ws, "workspace", "create", "--name", "stuck-render")

	// The delivery stage: an envelope whose render never ends, published
	// as ingest would (its row is restored from the envelope).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prod, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: []string{e.broker}, TopicPrefix: e.prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	id := schemas.NewID()
	p := schemas.SendPayload{MessageID: id, RFCMessageID: id + "@stuck.test", From: schemas.Address{Email: "noreply@stuck.test"},
		To: "stuck@example.test", Policy: schemas.PolicyRef{ID: "p-stuck", Key: "transactional", Kind: schemas.PolicyTransactional, Provider: "smtp"},
		Subject: "stuck", HTML: nestedLoop, AcceptedAt: time.Now().UTC()}
	payload, err := schemas.AppendSendPayload(nil, &p)
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.Publish(ctx, schemas.TopicTransactional, schemas.Envelope{ID: id, Workspace: ws.WorkspaceID,
		Type: schemas.TypeTransactionalSend, Key: ws.WorkspaceID + ":stuck@example.test", OccurredAt: p.AcceptedAt, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	pg, err := pgxpool.New(ctx, e.st.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	for claimed := false; !claimed; time.Sleep(100 * time.Millisecond) {
		_ = pg.QueryRow(ctx, "SELECT claim_token IS NOT NULL FROM transactional_messages WHERE id = $1", id).Scan(&claimed)
		if ctx.Err() != nil {
			t.Fatal("the delivery stage never claimed the message")
		}
	}

	// The request path: a validate rendering the same template.
	body, _ := json.Marshal(map[string]any{"to": "a@example.test", "subject": "x", "htmlContent": nestedLoop})
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/api/v1/transactional/validate", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ws.APIKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	time.Sleep(time.Second)
	select {
	case st := <-answered:
		t.Fatalf("validate answered %d: the render was not stuck, the test proves nothing", st)
	default:
	}

	start := time.Now()
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	select {
	case err := <-exited:
		took := time.Since(start)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitShutdownBound {
			t.Errorf("exit: %v, want status %d (the bound ended a stuck drain)", err, exitShutdownBound)
		}
		if took > bound+time.Second {
			t.Fatalf("exited %s after SIGTERM, bound %s", took, bound)
		}
		t.Logf("exited %s after SIGTERM (bound %s): %v", took.Round(time.Millisecond), bound, err)
	case <-time.After(bound + 10*time.Second):
		t.Fatalf("still running %s after SIGTERM (bound %s)", time.Since(start), bound)
	}
	// Nothing was lost: the message is still there, unfinished, for the
	// next worker (its claim runs out and it is settled then).
	var status string
	if err := pg.QueryRow(ctx, "SELECT status FROM transactional_messages WHERE id = $1", id).Scan(&status); err != nil || status != "queued" {
		t.Fatalf("message after the exit: %q, %v", status, err)
	}
}

// serverWith is server with extra environment variables.
func (e *e2eEnv) serverWith(t *testing.T, role string, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	addr := freeAddr(t)
	cmd := e.start(t, role+"-"+addr, append([]string{"SENDSTREAM_LISTEN=" + addr, "SENDSTREAM_SITE_URL=http://" + addr}, extra...), role)
	base := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return cmd, base
			}
		}
	}
	t.Fatalf("%s on %s never became ready (%s)", role, addr, strings.Join(extra, " "))
	return nil, ""
}
