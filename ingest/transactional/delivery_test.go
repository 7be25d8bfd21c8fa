package transactional_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/mail"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"
	"github.com/prometheus/client_golang/prometheus"

	"sendstream/ingest/ingesttest"
	"sendstream/ingest/transactional"
	"sendstream/schemas"
	"sendstream/sinks/email/smtptest"
)

// TestConcurrentSameExternalIDSendsOnce: 50 concurrent sends with one
// externalId, spread over two servers (separate processes' worth of caches
// and state, same Postgres and broker): one 201, 49 deduplicated 200s with
// the same message, exactly one message at the SMTP server.
func TestConcurrentSameExternalIDSendsOnce(t *testing.T) {
	e := newEnv(t, envOpts{})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	e.subscribeHook(ws, "TRANSACTIONAL_SENT", "https://hooks.example.com/in")
	second := e.h.Second(t, ingesttest.Options{})
	body := map[string]any{"to": "once@example.test", "subject": "Only once", "htmlContent": "<p>{{ n }}</p>",
		"externalId": "same-key", "data": map[string]any{"n": 1}}
	var created, dedup atomic.Int32
	ids := make([]string, 50)
	parallel(50, func(i int) {
		h := e.h
		if i%2 == 1 {
			h = second
		}
		st, raw := h.Do("POST", "/api/v1/transactional/send", key, body)
		switch {
		case st == 201 && bytes.Contains(raw, []byte(`"deduplicated":false`)):
			created.Add(1)
		case st == 200 && bytes.Contains(raw, []byte(`"deduplicated":true`)):
			dedup.Add(1)
		default:
			t.Errorf("send %d: %d %s", i, st, raw)
		}
		if j := bytes.Index(raw, []byte(`"id":"`)); j >= 0 {
			ids[i] = string(raw[j+6 : j+6+32])
		}
	})
	if created.Load() != 1 || dedup.Load() != 49 {
		t.Fatalf("created %d, deduplicated %d; want 1 and 49", created.Load(), dedup.Load())
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("answers name different messages: %s and %s", ids[0], id)
		}
	}
	e.waitStatus(key, ids[0], "sent")
	if _, byExt := e.status(key, "ext:same-key"); byExt["id"] != ids[0] {
		t.Errorf("status by ext: %v", byExt)
	}
	time.Sleep(1500 * time.Millisecond) // room for a duplicate to show up
	if got := e.messagesTo("once@example.test"); len(got) != 1 {
		t.Fatalf("%d messages at the SMTP server, want exactly 1", len(got))
	}
	// A later repeat answers the original, now sent, and sends nothing.
	st, ans := e.send(key, body)
	if st != 200 || ans["deduplicated"] != true || ans["status"] != "sent" || ans["id"] != ids[0] {
		t.Errorf("late repeat: %d %v", st, ans)
	}
	// A repeat with a different body still answers the original.
	st, ans = e.send(key, map[string]any{"to": "other@example.test", "subject": "x", "htmlContent": "y", "externalId": "same-key"})
	if st != 200 || ans["to"] != "once@example.test" || ans["deduplicated"] != true {
		t.Errorf("repeat with another body: %d %v", st, ans)
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(e.smtp.Messages()); n != 1 {
		t.Errorf("%d messages at the SMTP server after repeats", n)
	}
	// One TRANSACTIONAL_SENT: every copy on the topic has the one id
	// (each repeat republished the queued send, and the delivery stage
	// answers a redelivered send with the outputs of its recorded
	// outcome, ids unchanged, so consumers dedup by id).
	hooks := e.envelopes(schemas.TopicWebhooks, schemas.TypeWebhookTransactionalSent, ws)
	if len(hooks) == 0 {
		t.Error("no TRANSACTIONAL_SENT envelope")
	}
	for _, h := range hooks {
		if want := schemas.ChildID(ids[0], schemas.TypeWebhookTransactionalSent, 0); h.ID != want {
			t.Errorf("TRANSACTIONAL_SENT %s, want the one id %s", h.ID, want)
		}
	}
}

// TestRepeatRepublishesAQueuedMessage: when a first attempt stored the
// message but its publish never happened (the server answered 503), the
// client's retry with the same externalId and body publishes it (same
// envelope id) and it is delivered once.
func TestRepeatRepublishesAQueuedMessage(t *testing.T) {
	e := newEnv(t, envOpts{})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	body := map[string]any{"to": "retry@example.test", "subject": "Retry", "htmlContent": "<p>r</p>", "externalId": "lost-publish"}
	raw, _ := json.Marshal(body) // what the harness sends
	sum := sha256.Sum256(raw)
	id := schemas.IDFromKey(ws, schemas.TransactionalIDScope, "lost-publish")
	// The first attempt: stored exactly as a send stores it, never published.
	_, ok, _, err := e.store.Claim(context.Background(), transactional.NewMessage{ID: id, Workspace: ws, ExternalID: "lost-publish",
		RequestHash: sum[:], To: "retry@example.test", RFCMessageID: id + "@sendstream.local", PolicyID: transactional.BuiltinPolicy(ws).ID, Provider: "smtp"})
	if err != nil || !ok {
		t.Fatalf("store the first attempt: %v %v", ok, err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(e.messagesTo("retry@example.test")); n != 0 {
		t.Fatalf("%d messages before the retry", n)
	}
	st, ans := e.send(key, body)
	if st != 200 || ans["id"] != id || ans["deduplicated"] != true || ans["status"] != "queued" {
		t.Fatalf("retry: %d %v", st, ans)
	}
	e.waitStatus(key, id, "sent")
	// A repeat after sending republishes nothing.
	st, _ = e.send(key, body)
	if st != 200 {
		t.Fatalf("repeat after sending: %d", st)
	}
	time.Sleep(time.Second)
	if n := len(e.messagesTo("retry@example.test")); n != 1 {
		t.Errorf("%d messages, want 1", n)
	}
	if n := len(e.envelopes(schemas.TopicTransactional, schemas.TypeTransactionalSend, ws)); n != 1 {
		t.Errorf("%d send envelopes, want 1 (only the queued repeat republishes)", n)
	}
}

// TestSMTPOutageLosesNothingAndSendsOnce: with the SMTP server stopped,
// sends are accepted (queued), the breaker opens, and when the server
// returns every message is delivered exactly once.
func TestSMTPOutageLosesNothingAndSendsOnce(t *testing.T) {
	e := newEnv(t, envOpts{})
	_, key := e.workspace(ingesttest.WorkspaceOpts{})
	// Warm up: one message while the server is up.
	st, ans := e.send(key, map[string]any{"to": "warm@example.test", "subject": "warm", "htmlContent": "<p>w</p>"})
	if st != 201 {
		t.Fatal(st, ans)
	}
	e.waitStatus(key, ans["id"].(string), "sent")

	e.smtp.Stop()
	const n = 30
	ids := make([]string, n)
	for i := 0; i < n; i++ {
		st, ans := e.send(key, map[string]any{"to": fmt.Sprintf("down%02d@example.test", i), "subject": fmt.Sprint("during outage ", i), "htmlContent": "<p>o</p>"})
		if st != 201 || ans["status"] != "queued" {
			t.Fatalf("send %d during the outage: %d %v", i, st, ans)
		}
		ids[i] = ans["id"].(string)
	}
	// The breaker opens.
	deadline := time.Now().Add(20 * time.Second)
	for !breakerOpen(t, e) {
		if time.Now().After(deadline) {
			t.Fatal("the SMTP breaker did not open")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	for _, id := range ids {
		if s := e.pgStatus(id); s != "queued" {
			t.Fatalf("message %s is %s during the outage, want queued", id, s)
		}
	}
	e.smtp.Restart(t)
	for _, id := range ids {
		e.waitStatus(key, id, "sent")
	}
	time.Sleep(1500 * time.Millisecond)
	got := map[string]int{}
	for _, m := range e.smtp.Messages() {
		pm, err := mail.ReadMessage(bytes.NewReader(m.Data))
		if err != nil {
			t.Fatal(err)
		}
		got[pm.Header.Get("To")]++
	}
	for i := 0; i < n; i++ {
		if c := got[fmt.Sprintf("down%02d@example.test", i)]; c != 1 {
			t.Errorf("down%02d received %d copies, want 1", i, c)
		}
	}
	if len(e.smtp.Messages()) != n+1 {
		t.Errorf("%d messages in all, want %d", len(e.smtp.Messages()), n+1)
	}
}

// breakerOpen reads the SMTP breaker's state from the process metrics.
func breakerOpen(t *testing.T, e *env) bool {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sendstream_breaker_state" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "breaker" && l.GetValue() == "smtp "+e.smtp.Addr {
					return m.GetGauge().GetValue() == 2
				}
			}
		}
	}
	return false
}

// TestProviderRefusalFailsWithReason: a 5xx from the relay moves the
// message queued → failed with the reason; a lost answer after the data
// fails it as an unknown outcome, never sent twice.
func TestProviderRefusalFailsWithReason(t *testing.T) {
	var drops atomic.Int32
	e := newEnv(t, envOpts{smtp: smtptest.Options{
		Rcpt: func(to string) error {
			if strings.HasPrefix(to, "nouser") {
				return &gosmtp.SMTPError{Code: 550, EnhancedCode: gosmtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
			}
			return nil
		},
		Data: func(m smtptest.Message) error {
			if bytes.Contains(m.Data, []byte("Subject: drop me")) {
				drops.Add(1)
				return smtptest.DropConnection
			}
			return nil
		},
	}})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	// Subscribed, so that a TRANSACTIONAL_SENT for a failed message would
	// be published (the delivery stage publishes only wanted events).
	e.subscribeHook(ws, "TRANSACTIONAL_SENT", "https://hooks.example.com/in")
	st, ans := e.send(key, map[string]any{"to": "nouser@example.test", "subject": "x", "htmlContent": "<p>x</p>"})
	if st != 201 {
		t.Fatal(st, ans)
	}
	id := ans["id"].(string)
	got := e.waitStatus(key, id, "failed")
	if r, _ := got["failureReason"].(string); !strings.Contains(r, "550") || !strings.Contains(r, "no such mailbox") {
		t.Errorf("failure reason %q", r)
	}
	evs := got["events"].([]any)
	if len(evs) != 2 || evs[1].(map[string]any)["status"] != "failed" {
		t.Errorf("events: %v", evs)
	}
	if rows := e.chStatuses(ws, id, 2); strings.Join(rows, ",") != "queued,failed" {
		t.Errorf("clickhouse rows: %v", rows)
	}
	// A template that parses but fails while rendering: accepted (a send
	// checks syntax and variables), then failed by the delivery stage.
	st, ans = e.send(key, map[string]any{"to": "render@example.test", "subject": "x", "htmlContent": `{{ "a" | divided_by: 0 }}`})
	if st != 201 {
		t.Fatal(st, ans)
	}
	got = e.waitStatus(key, ans["id"].(string), "failed")
	if r, _ := got["failureReason"].(string); !strings.HasPrefix(r, "template error:") {
		t.Errorf("failure reason %q", r)
	}
	st, ans = e.send(key, map[string]any{"to": "lost@example.test", "subject": "drop me", "htmlContent": "<p>x</p>"})
	if st != 201 {
		t.Fatal(st, ans)
	}
	got = e.waitStatus(key, ans["id"].(string), "failed")
	if r, _ := got["failureReason"].(string); !strings.Contains(r, "outcome unknown") {
		t.Errorf("failure reason %q", r)
	}
	time.Sleep(time.Second)
	if drops.Load() != 1 {
		t.Errorf("the message with a lost answer was transmitted %d times", drops.Load())
	}
	if n := len(e.envelopes(schemas.TopicWebhooks, schemas.TypeWebhookTransactionalSent, ws)); n != 0 {
		t.Errorf("%d TRANSACTIONAL_SENT for failed messages", n)
	}
}

// TestLargePayloadIsStoredNotPublished: a send too large for one broker
// message (attachments) is stored in Postgres, referenced by the envelope
// and delivered intact.
func TestLargePayloadIsStoredNotPublished(t *testing.T) {
	e := newEnv(t, envOpts{})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	blob := bytes.Repeat([]byte("0123456789abcdef"), 2<<16) // 2 MB
	st, ans := e.send(key, map[string]any{"to": "big@example.test", "subject": "big", "htmlContent": "<p>big</p>", "externalId": "big-1",
		"attachments": []any{map[string]any{"filename": "big.bin", "content": b64(blob)}}})
	if st != 201 {
		t.Fatal(st, ans)
	}
	envs := e.envelopes(schemas.TopicTransactional, schemas.TypeTransactionalSend, ws)
	if len(envs) != 1 || len(envs[0].Payload) > 4096 || !strings.Contains(string(envs[0].Payload), `"spilled":true`) {
		t.Fatalf("envelope of a large send: %d envelopes, payload %d bytes", len(envs), len(envs[0].Payload))
	}
	m := e.waitMessage("big@example.test")
	if p := m.leaf("application/octet-stream"); p == nil || !bytes.Equal(p.body, blob) {
		t.Error("attachment not delivered intact")
	}
	e.waitStatus(key, ans["id"].(string), "sent")
	var n int
	_ = e.pg.QueryRow(context.Background(), "SELECT count(*) FROM transactional_payloads WHERE message_id = $1", ans["id"]).Scan(&n)
	if n != 0 {
		t.Error("stored payload kept after sending")
	}
}

// TestLostRowIsRestoredFromTheEnvelope: claims commit asynchronously, so a
// Postgres crash may lose a stored message whose envelope the broker has;
// the delivery stage stores the row again from the envelope and delivers.
func TestLostRowIsRestoredFromTheEnvelope(t *testing.T) {
	e := newEnv(t, envOpts{})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	id := schemas.NewID()
	p := schemas.SendPayload{MessageID: id, RFCMessageID: id + "@sendstream.local", ExternalID: "lost-row", To: "lost-row@example.test",
		From: schemas.Address{Email: "noreply@sendstream.local"}, Policy: schemas.PolicyRef{ID: transactional.BuiltinPolicy(ws).ID, Key: "transactional", Kind: "transactional", Provider: "smtp"},
		Subject: "Restored {{ n }}", HTML: "<p>{{ n }}</p>", Data: json.RawMessage(`{"n":7}`), AcceptedAt: time.Now().UTC()}
	raw, _ := json.Marshal(p)
	env := schemas.Envelope{ID: id, Workspace: ws, Type: schemas.TypeTransactionalSend, Key: ws + ":" + id, OccurredAt: p.AcceptedAt, Payload: raw}
	if err := e.h.Publisher.Publish(context.Background(), schemas.TopicTransactional, env); err != nil {
		t.Fatal(err)
	}
	m := e.waitMessage("lost-row@example.test")
	if m.subject() != "Restored 7" {
		t.Errorf("subject %q", m.subject())
	}
	got := e.waitStatus(key, id, "sent")
	if got["externalId"] != "lost-row" || got["to"] != "lost-row@example.test" {
		t.Errorf("restored row: %v", got)
	}
	// An envelope of a workspace that no longer exists is dropped.
	gone := env
	gone.ID, gone.Workspace, gone.Key = schemas.NewID(), "no-such-workspace", "no-such-workspace:x"
	p.MessageID, p.To = gone.ID, "gone@example.test"
	gone.Payload, _ = json.Marshal(p)
	if err := e.h.Publisher.Publish(context.Background(), schemas.TopicTransactional, gone); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if n := len(e.messagesTo("gone@example.test")); n != 0 {
		t.Errorf("%d messages for a workspace that is gone", n)
	}
}
