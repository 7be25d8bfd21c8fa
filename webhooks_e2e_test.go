package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// localWebhookEnv are the two local-development settings of issue 25 item 6
// that `make run` passes through from the developer's environment.
var localWebhookEnv = []string{"SENDSTREAM_WEBHOOK_ALLOW_PRIVATE=127.0.0.0/8", "SENDSTREAM_WEBHOOK_INSECURE_TLS=1"}

// receivedHook is one request the test's receiver got.
type receivedHook struct {
	at     time.Time
	header http.Header
	body   []byte
}

// TestLocalWebhookDelivery is what a developer does under `make run` with
// SENDSTREAM_WEBHOOK_ALLOW_PRIVATE=127.0.0.0/8 and
// SENDSTREAM_WEBHOOK_INSECURE_TLS=1 (issue 25, Done when): the real binary's
// `serve` logs a warning for each setting; an https receiver on 127.0.0.1
// with a self-signed certificate is made a dashboard endpoint with `admin
// webhook-endpoint create`; a contact upsert over HTTP reaches it as
// CONTACT_CREATED, with the spec 2.6 body the OpenAPI document's `webhooks`
// section describes (checked against the document the server serves), a
// signature the Standard Webhooks reference library verifies and the legacy
// X-Signature-256. The latency is logged, not asserted (the test fails only
// when nothing arrives within 30 s).
func TestLocalWebhookDelivery(t *testing.T) {
	e := newE2E(t)
	hooks := make(chan receivedHook, 16)
	recv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hooks <- receivedHook{at: time.Now(), header: r.Header.Clone(), body: b}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	if !strings.HasPrefix(recv.URL, "https://127.0.0.1:") {
		t.Fatalf("receiver at %s, want https://127.0.0.1:<port>", recv.URL)
	}
	target := recv.URL + "/hooks/sendstream"

	// Without the setting, the admin command refuses the loopback target:
	// the setting is what lets it through.
	var ws workspace
	e.admin(t, &ws, "workspace", "create", "--name", "Local webhooks")
	if out, err := e.adminWith(t, nil, "webhook-endpoint", "create", "--workspace", ws.WorkspaceID,
		"--url", target, "--events", "CONTACT_CREATED"); err == nil {
		t.Fatalf("webhook-endpoint create of %s without SENDSTREAM_WEBHOOK_ALLOW_PRIVATE succeeded: %s", target, out)
	}

	logPath := filepath.Join(t.TempDir(), "serve.log")
	base := e.serveLogged(t, logPath, localWebhookEnv...)
	serveLog, _ := os.ReadFile(logPath)
	for _, want := range []string{"SENDSTREAM_WEBHOOK_ALLOW_PRIVATE is set", "SENDSTREAM_WEBHOOK_INSECURE_TLS is set"} {
		if !logHasWarning(serveLog, want) {
			t.Errorf("serve logged no warning %q at start:\n%s", want, tail(serveLog, 4000))
		}
	}

	out, err := e.adminWith(t, localWebhookEnv, "webhook-endpoint", "create", "--workspace", ws.WorkspaceID,
		"--url", target, "--events", "CONTACT_CREATED")
	if err != nil {
		t.Fatalf("webhook-endpoint create: %v\n%s", err, out)
	}
	var ep struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(out, &ep); err != nil || ep.ID == "" || !strings.HasPrefix(ep.Secret, "whsec_") {
		t.Fatalf("webhook-endpoint create answered %s (%v)", out, err)
	}

	sent := time.Now()
	st, body := postJSON(t, base+"/api/v1/contacts", ws.APIKey, `{"email":"Ada.Local@Example.com","firstName":"Ada"}`)
	answered := time.Now()
	var up struct {
		ID      string `json:"id"`
		Created bool   `json:"created"`
	}
	if err := json.Unmarshal(body, &up); err != nil || (st != 201 && st != 200) || !up.Created || up.ID == "" {
		t.Fatalf("contact upsert: %d %s", st, body)
	}

	var got receivedHook
	select {
	case got = <-hooks:
	case <-time.After(30 * time.Second):
		t.Fatalf("no delivery reached %s within 30 s of the upsert", target)
	}
	t.Logf("upsert → delivery: %v from sending the upsert, %v from its answer (issue 25 asks ≤ 2 s)",
		got.at.Sub(sent).Round(time.Millisecond), got.at.Sub(answered).Round(time.Millisecond))

	h := got.header
	for name, want := range map[string]string{
		"Content-Type": "application/json", "X-Webhook-Event": "CONTACT_CREATED", "X-Webhook-Attempt": "1",
	} {
		if v := h.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
	if ua := h.Get("User-Agent"); !strings.Contains(ua, "Sendstream") {
		t.Errorf("User-Agent %q does not name the service", ua)
	}
	wh, err := standardwebhooks.NewWebhook(ep.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(got.body, h); err != nil {
		t.Errorf("Standard Webhooks verification: %v (webhook-id %q, webhook-timestamp %q, webhook-signature %q)",
			err, h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature"))
	}
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(ep.Secret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	mac.Write(got.body)
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); h.Get("X-Signature-256") != want {
		t.Errorf("X-Signature-256 %q, want %q", h.Get("X-Signature-256"), want)
	}

	var msg struct {
		ID        string                     `json:"id"`
		Event     string                     `json:"event"`
		Timestamp string                     `json:"timestamp"`
		TeamID    string                     `json:"teamId"`
		Data      map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(got.body, &msg); err != nil {
		t.Fatalf("delivery body %s: %v", got.body, err)
	}
	if msg.ID == "" || msg.ID != h.Get("webhook-id") || msg.Event != "CONTACT_CREATED" || msg.TeamID != ws.WorkspaceID {
		t.Errorf("body id %q (webhook-id %q), event %q, teamId %q (workspace %s)", msg.ID, h.Get("webhook-id"), msg.Event, msg.TeamID, ws.WorkspaceID)
	}
	if ts, err := time.Parse(time.RFC3339Nano, msg.Timestamp); err != nil || ts.Before(sent.Add(-time.Minute)) || ts.After(got.at.Add(time.Minute)) {
		t.Errorf("timestamp %q (%v) is not the time of the upsert", msg.Timestamp, err)
	}
	if string(msg.Data["contactId"]) != `"`+up.ID+`"` || string(msg.Data["email"]) != `"ada.local@example.com"` || string(msg.Data["firstName"]) != `"Ada"` {
		t.Errorf("data %s, want contactId %s, email ada.local@example.com, firstName Ada", got.body, up.ID)
	}
	checkAgainstServedDocument(t, base, ws.APIKey, "CONTACT_CREATED", got.body)

	// One delivery: a 204 ends it, nothing else arrives.
	select {
	case extra := <-hooks:
		t.Errorf("a second delivery arrived: %s", extra.body)
	case <-time.After(2 * time.Second):
	}
}

// TestWorkerWarnsOfLocalWebhookSettings: a process running only stages
// (`sendstream worker`, the delivery stage dials with the settings) logs
// the same two warnings at start as `serve`.
func TestWorkerWarnsOfLocalWebhookSettings(t *testing.T) {
	e := newE2E(t)
	logPath := filepath.Join(t.TempDir(), "worker.log")
	cmd := exec.Command(binary(t), "worker", "--stages", "webhookdelivery")
	cmd.Env = append(append(os.Environ(), e.vars...), localWebhookEnv...)
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()
	var b []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		b, _ = os.ReadFile(logPath)
		if logHasWarning(b, "SENDSTREAM_WEBHOOK_ALLOW_PRIVATE is set") && logHasWarning(b, "SENDSTREAM_WEBHOOK_INSECURE_TLS is set") {
			return
		}
	}
	t.Errorf("worker logged no warning for both settings within 30 s:\n%s", tail(b, 4000))
}

// TestMakeRunSetsNoWebhookSetting: `make run` and the local stack leave
// both local-development settings to the developer's environment (DESIGN.md:
// "make run sets neither"), so the SSRF guard is on unless asked otherwise.
func TestMakeRunSetsNoWebhookSetting(t *testing.T) {
	for _, f := range []string{"Makefile", "deploy/stack.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("SENDSTREAM_WEBHOOK_")) {
			t.Errorf("%s mentions SENDSTREAM_WEBHOOK_*: make run must set neither webhook setting", f)
		}
	}
}

// logHasWarning reports whether the JSON log holds a WARN record whose
// message starts with prefix.
func logHasWarning(log []byte, prefix string) bool {
	for _, line := range bytes.Split(log, []byte("\n")) {
		var rec struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Level == "WARN" && strings.HasPrefix(rec.Msg, prefix) {
			return true
		}
	}
	return false
}

// serveLogged starts `sendstream serve` as `make run` does (plus the test's
// broker, topic prefix and data dir) with its log in logPath, and waits
// until /readyz answers 200.
func (e *e2eEnv) serveLogged(t *testing.T, logPath string, extra ...string) string {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(binary(t), "serve")
	cmd.Env = append(append(append(os.Environ(), e.vars...), "SENDSTREAM_LISTEN="+addr, "SENDSTREAM_SITE_URL=http://"+addr), extra...)
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start serve: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("--- serve log ---\n%s", tail(b, 4000))
		}
	})
	base := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
	}
	t.Fatalf("serve on %s never became ready", addr)
	return ""
}

// adminWith runs `sendstream admin args...` with the test's settings and
// extra, returning stdout, or stderr with the error.
func (e *e2eEnv) adminWith(t *testing.T, extra []string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"admin"}, args...)...)
	cmd.Env = append(append(os.Environ(), e.vars...), extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stderr.Bytes(), err
	}
	return stdout.Bytes(), nil
}

// postJSON POSTs body with the API key and returns the status and answer.
func postJSON(t *testing.T, url, key, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// checkAgainstServedDocument validates a delivery body against the request
// body schema of event's operation in the `webhooks` section of the OpenAPI
// document the server serves, and checks that data carries no member the
// document does not list.
func checkAgainstServedDocument(t *testing.T, base, key, event string, body []byte) {
	t.Helper()
	st, raw, _ := get(t, base+"/api/v1/openapi.json", key)
	if st != 200 {
		t.Fatalf("GET /api/v1/openapi.json: %d %s", st, raw)
	}
	var doc struct {
		Webhooks map[string]struct {
			Post struct {
				RequestBody struct {
					Content map[string]struct {
						Schema json.RawMessage `json:"schema"`
					} `json:"content"`
				} `json:"requestBody"`
			} `json:"post"`
		} `json:"webhooks"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	schemaJSON := doc.Webhooks[event].Post.RequestBody.Content["application/json"].Schema
	if schemaJSON == nil {
		t.Fatalf("the served document has no webhooks.%s request body", event)
	}
	schemaDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem:///"+event+".json", schemaDoc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem:///" + event + ".json")
	if err != nil {
		t.Fatalf("webhooks.%s schema: %v", event, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("the delivery does not match webhooks.%s of the served document: %v\n%s", event, err, body)
	}
	var s struct {
		Properties struct {
			Data struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"data"`
		} `json:"properties"`
	}
	var b struct {
		Data map[string]json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(schemaJSON, &s)
	_ = json.Unmarshal(body, &b)
	for k := range b.Data {
		if _, ok := s.Properties.Data.Properties[k]; !ok {
			t.Errorf("data member %q is not in the document's webhooks.%s", k, event)
		}
	}
}
