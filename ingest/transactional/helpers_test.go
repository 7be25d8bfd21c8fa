package transactional_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/ingest"
	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/transactional"
	"sendstream/pipeline"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/email/smtptest"
	"sendstream/stages/delivery"
	"sendstream/stages/messagelog"
)

const secret = "test-secret-for-unsubscribe-links"

// env is one running system: the ingest server with the transactional
// routes, the delivery and messagelog stages on the same broker, Postgres,
// ClickHouse and a real SMTP server.
type env struct {
	t        testing.TB
	h        *ingesttest.Harness
	pg       *pgxpool.Pool
	ch       driver.Conn
	smtp     *smtptest.Server
	store    *transactional.Store
	contacts *contacts.Store
	smtpURL  string
	settings map[string]string // extra settings of the stages
}

type envOpts struct {
	smtp      smtptest.Options
	smtpQuery string // extra query of the SMTP URL
	noStages  bool
	sns       *transactional.SNSVerifier
	// settings are added to the stages' Resources.Settings (e.g. a render
	// budget of the delivery stage's own).
	settings map[string]string
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	pg := stack.PG(t)
	e := &env{t: t, pg: pg, store: transactional.NewStore(pg), contacts: contacts.NewStore(pg), settings: o.settings}
	t.Cleanup(e.contacts.Close)
	e.smtp = smtptest.Start(t, o.smtp)
	deps := transactional.Deps{PG: pg, Contacts: e.contacts, Secret: secret, SNS: o.sns}
	// Multi-megabyte bodies are slow under the race detector: allow time.
	e.h = ingesttest.StartWith(t, ingesttest.Options{Config: ingest.Config{RequestTimeout: 3 * time.Minute}}, transactional.Routes(deps)...)
	e.h.Client.Timeout = 3 * time.Minute
	e.smtpURL = "smtp://" + e.smtp.Addr + "?tls=none&breaker_failures=3&breaker_open=300ms" + o.smtpQuery
	if !o.noStages {
		e.ch = stack.CH(t)
		e.runStages()
	}
	return e
}

// runStages runs the delivery, messagelog and messagestatus stages until
// the test ends.
func (e *env) runStages() {
	t := e.t
	del, ok := pipeline.Lookup(delivery.Name)
	if !ok {
		t.Fatal("delivery stage not registered")
	}
	stages := []pipeline.Registered{del}
	if e.ch != nil {
		ml, _ := pipeline.Lookup(messagelog.Name)
		ms, _ := pipeline.Lookup(messagelog.StatusName)
		stages = append(stages, ml, ms)
	}
	settings := map[string]string{"site_url": e.h.URL, "secret": secret, "smtp_url": e.smtpURL}
	for k, v := range e.settings {
		settings[k] = v
	}
	e.runPipeline("pipeline", stages, pipeline.Resources{Postgres: e.pg, ClickHouse: e.ch, Publisher: e.h.Publisher, Settings: settings})
}

// runPipeline runs stages with res on e's broker until the test ends, with
// short retry, flush, fetch and group timings; what names the run in
// failures.
func (e *env) runPipeline(what string, stages []pipeline.Registered, res pipeline.Resources) {
	pipelinetest.Start(context.Background(), e.t, what, pipeline.RunConfig{
		Brokers: e.h.Brokers, Stages: stages, Resources: res,
		BackoffBase: 50 * time.Millisecond, BackoffMax: 300 * time.Millisecond, FlushInterval: 100 * time.Millisecond,
		MaxWait: 50 * time.Millisecond, SessionTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
		JoinGroupBackoff: 100 * time.Millisecond,
	})
}

// workspace creates a workspace and its full-access key.
func (e *env) workspace(o ingesttest.WorkspaceOpts) (string, string) {
	e.t.Helper()
	return e.h.NewWorkspace(e.t, o)
}

// send posts a send and decodes the answer.
func (e *env) send(key string, body any) (int, map[string]any) {
	e.t.Helper()
	return e.call("POST", "/api/v1/transactional/send", key, body)
}

func (e *env) call(method, path, key string, body any) (int, map[string]any) {
	e.t.Helper()
	st, raw := e.h.Do(method, path, key, body)
	var m map[string]any
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &m); err != nil {
			e.t.Fatalf("%s %s: answer is not JSON: %s", method, path, raw)
		}
	}
	return st, m
}

// status reads a message's status.
func (e *env) status(key, ref string) (int, map[string]any) {
	e.t.Helper()
	return e.call("GET", "/api/v1/transactional/"+ref+"/status", key, nil)
}

// waitStatus polls Postgres until the message has status want, then
// returns what the status endpoint says (one call: it is rate limited).
func (e *env) waitStatus(key, id, want string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var s string
		_ = e.pg.QueryRow(context.Background(), "SELECT status FROM transactional_messages WHERE id = $1", id).Scan(&s)
		if s == want {
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("message %s: status %q, want %s", id, s, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, m := e.status(key, id)
	if st != 200 || m["status"] != want {
		e.t.Fatalf("status of %s: %d %v, want %s", id, st, m, want)
	}
	return m
}

// template stores a template.
func (e *env) template(ws string, t transactional.Template) string {
	e.t.Helper()
	id, err := e.store.CreateTemplate(context.Background(), ws, t)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// exec runs SQL (test setup only).
func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.pg.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("exec %s: %v", sql, err)
	}
}

// contact upserts a contact through the contacts store.
func (e *env) contact(ws, email string, f contacts.Fields) contacts.Contact {
	e.t.Helper()
	r, err := e.contacts.Upsert(context.Background(), ws, contacts.UpsertInput{Email: email, Fields: f, Source: "test"})
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Contact
}

func ptr(s string) *string { return &s }

// messagesTo returns the SMTP messages whose To header is addr.
func (e *env) messagesTo(addr string) []smtptest.Message {
	var out []smtptest.Message
	for _, m := range e.smtp.Messages() {
		if pm, err := mail.ReadMessage(bytes.NewReader(m.Data)); err == nil && pm.Header.Get("To") == addr {
			out = append(out, m)
		}
	}
	return out
}

// waitMessage waits for exactly one SMTP message to addr and returns it.
func (e *env) waitMessage(addr string) *parsed {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := e.messagesTo(addr)
		if len(got) > 1 {
			e.t.Fatalf("%d messages to %s, want one", len(got), addr)
		}
		if len(got) == 1 {
			return parse(e.t, got[0])
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no message to %s reached the SMTP server", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// parsed is a received message taken apart with the standard library.
type parsed struct {
	raw    smtptest.Message
	header mail.Header
	parts  []part // leaves in order
	tree   []string
}

type part struct {
	ctype, disposition, cid, filename string
	body                              []byte
}

func (p *parsed) subject() string {
	s, _ := new(mime.WordDecoder).DecodeHeader(p.header.Get("Subject"))
	return s
}

func (p *parsed) leaf(ctype string) *part {
	for i := range p.parts {
		if p.parts[i].ctype == ctype {
			return &p.parts[i]
		}
	}
	return nil
}

func parse(t testing.TB, m smtptest.Message) *parsed {
	t.Helper()
	pm, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		t.Fatalf("received message does not parse: %v", err)
	}
	out := &parsed{raw: m, header: pm.Header}
	var walk func(h map[string][]string, body io.Reader, depth int)
	walk = func(h map[string][]string, body io.Reader, depth int) {
		get := func(k string) string {
			if v := h[k]; len(v) > 0 {
				return v[0]
			}
			return ""
		}
		mt, params, err := mime.ParseMediaType(get("Content-Type"))
		if err != nil {
			t.Fatalf("content type %q: %v", get("Content-Type"), err)
		}
		out.tree = append(out.tree, strings.Repeat(" ", depth)+mt)
		if strings.HasPrefix(mt, "multipart/") {
			r := multipart.NewReader(body, params["boundary"])
			for {
				p, err := r.NextRawPart()
				if err == io.EOF {
					return
				}
				if err != nil {
					t.Fatalf("multipart: %v", err)
				}
				walk(p.Header, p, depth+1)
			}
		}
		data, _ := io.ReadAll(body)
		switch get("Content-Transfer-Encoding") {
		case "quoted-printable":
			data, _ = io.ReadAll(quotedprintable.NewReader(bytes.NewReader(data)))
		case "base64":
			data, _ = io.ReadAll(base64.NewDecoder(base64.StdEncoding, bytes.NewReader(data)))
		}
		disp, dp, _ := mime.ParseMediaType(get("Content-Disposition"))
		out.parts = append(out.parts, part{ctype: mt, disposition: disp, cid: get("Content-Id"), filename: dp["filename"], body: data})
	}
	walk(pm.Header, pm.Body, 0)
	return out
}

// envelopes returns the envelopes of a type published to a topic for ws.
func (e *env) envelopes(topic, typ, ws string) []schemas.Envelope {
	var out []schemas.Envelope
	for _, env := range e.h.Consume(e.t, topic) {
		if env.Type == typ && env.Workspace == ws {
			out = append(out, env)
		}
	}
	return out
}

// waitEnvelopes polls until n envelopes of a type exist for ws.
func (e *env) waitEnvelopes(topic, typ, ws string, n int) []schemas.Envelope {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := e.envelopes(topic, typ, ws)
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// chStatuses returns message_status rows of a message as "status" strings,
// deduplicated, in time order.
func (e *env) chStatuses(ws, messageID string, want int) []string {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, err := e.ch.Query(context.Background(),
			"SELECT status FROM message_status WHERE workspace = ? AND message_id = ? ORDER BY at, indexOf(['queued', 'sent', 'delivered', 'bounced', 'complained', 'failed'], status) LIMIT 1 BY event_id", ws, messageID)
		if err != nil {
			e.t.Fatalf("clickhouse: %v", err)
		}
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				e.t.Fatal(err)
			}
			out = append(out, s)
		}
		rows.Close()
		if len(out) >= want || time.Now().After(deadline) {
			return out
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pgStatus reads a message's status straight from Postgres.
func (e *env) pgStatus(id string) string {
	var s string
	if err := e.pg.QueryRow(context.Background(), "SELECT status FROM transactional_messages WHERE id = $1", id).Scan(&s); err != nil {
		return "missing: " + err.Error()
	}
	return s
}

// parallel runs fn n times concurrently.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); fn(i) }()
	}
	wg.Wait()
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func uniq(prefix string) string {
	return fmt.Sprintf("%s-%s@example.test", prefix, schemas.NewID()[16:])
}
