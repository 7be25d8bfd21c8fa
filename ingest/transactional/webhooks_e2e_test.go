package transactional_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/transactional"
	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/email"
	"sendstream/sinks/email/smtptest"
	"sendstream/sinks/webhook/webhooktest"
	"sendstream/stages/webhookdelivery"
	"sendstream/stages/webhookfanout"
)

// hookBody is a webhook delivery body (spec 2.6) as a receiver reads it.
type hookBody struct {
	ID        string         `json:"id"`
	Event     string         `json:"event"`
	Timestamp string         `json:"timestamp"`
	TeamID    string         `json:"teamId"`
	Data      map[string]any `json:"data"`
}

// hookReceiver is a REST hook receiver on loopback recording every body.
type hookReceiver struct {
	url  string
	mu   sync.Mutex
	got  []hookBody
	seen chan struct{}
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{seen: make(chan struct{}, 1024)}
	srv := webhooktest.NewReceiver(t, false, func(w http.ResponseWriter, req *http.Request) {
		var b hookBody
		raw, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(raw, &b); err != nil || req.Header.Get("X-Webhook-Event") != b.Event {
			t.Errorf("webhook request: header %q, body %s (%v)", req.Header.Get("X-Webhook-Event"), raw, err)
		}
		r.mu.Lock()
		r.got = append(r.got, b)
		r.mu.Unlock()
		r.seen <- struct{}{}
		w.WriteHeader(204)
	})
	r.url = srv.URL + "/hook"
	return r
}

// of returns the bodies received for event so far.
func (r *hookReceiver) of(event string) []hookBody {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []hookBody
	for _, b := range r.got {
		if b.Event == event {
			out = append(out, b)
		}
	}
	return out
}

// wait waits until n bodies of event arrived, then quiet more, and returns
// every body of event (more than n when more came).
func (r *hookReceiver) wait(t *testing.T, event string, n int, quiet time.Duration) []hookBody {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for len(r.of(event)) < n {
		select {
		case <-r.seen:
		case <-deadline:
			t.Fatalf("%d %s deliveries arrived within 30 s, want %d", len(r.of(event)), event, n)
		}
	}
	time.Sleep(quiet)
	return r.of(event)
}

// subscribeHook stores a REST hook of ws to event at target, as POST
// /v1/webhooks/subscribe does (the subscribe API refuses loopback targets;
// the delivery stage here allows them).
func (e *env) subscribeHook(ws, event, target string) {
	e.t.Helper()
	e.exec(`INSERT INTO webhook_subscriptions (id, workspace_id, event, target_url) VALUES ($1, $2, $3, $4)`,
		schemas.NewID(), ws, event, target)
}

// runWebhookStages runs the webhook fan-out stages (contacts and webhooks
// topics) and the webhook delivery stage on e's broker and Postgres until
// the test ends, loopback targets allowed.
func (e *env) runWebhookStages() {
	t := e.t
	stages, err := pipeline.SelectStages(webhookfanout.NameContacts, webhookfanout.NameWebhooks, webhookdelivery.Name)
	if err != nil {
		t.Fatal(err)
	}
	e.runPipeline("webhook pipeline", stages, pipeline.Resources{Postgres: e.pg, Publisher: e.h.Publisher,
		Settings: map[string]string{"webhook_allow_private": "127.0.0.0/8", "secret": "e2e-test-secret-0123456789abcdef"}})
}

// outboxRows counts the contacts outbox rows of ws holding an envelope of
// type typ (the upserts of e.contact leave rows of their own).
func (e *env) outboxRows(ws, typ string) int {
	e.t.Helper()
	var n int
	if err := e.pg.QueryRow(context.Background(), `SELECT count(*) FROM contact_outbox
		WHERE workspace_id = $1 AND kind = 'envelope' AND ((data->>'envelope')::jsonb)->>'type' = $2`, ws, typ).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// postUnsubscribe posts to an unsubscribe link: the RFC 8058 one-click body
// or the confirmation page's form, and returns the status.
func postUnsubscribe(t *testing.T, link string, oneClick bool) int {
	t.Helper()
	var resp *http.Response
	var err error
	if oneClick {
		resp, err = http.Post(link, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	} else {
		resp, err = http.PostForm(link, url.Values{"confirm": {"yes"}})
	}
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestUnsubscribeFiresContactUnsubscribed (issue 25 item 3): a contact
// whose status becomes UNSUBSCRIBED through a marketing email's unsubscribe
// link, by the RFC 8058 one-click POST of the link in the email or by the
// confirmation page's form, reaches a REST hook subscribed to
// CONTACT_UNSUBSCRIBED once, with the catalogue's data (contactId, email,
// occurredAt). A second click, and the link of a contact that complained
// (status COMPLAINED: EMAIL_COMPLAINED covers it), announce nothing.
func TestUnsubscribeFiresContactUnsubscribed(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.runWebhookStages()
	ws, key := e.workspace(ingesttest.WorkspaceOpts{Name: "Unsubscribe hooks"})
	ctx := context.Background()
	if _, err := e.store.AddDomain(ctx, ws, transactional.Domain{Domain: "hooks.test", Selector: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreatePolicy(ctx, ws, transactional.Policy{Key: "news", Kind: schemas.PolicyMarketing, FromEmail: "news@hooks.test"}); err != nil {
		t.Fatal(err)
	}
	recv := newHookReceiver(t)
	e.subscribeHook(ws, "CONTACT_UNSUBSCRIBED", recv.url)

	oneClick, form, complained := uniq("oneclick"), uniq("form"), uniq("complained")
	ids := map[string]string{}
	for _, to := range []string{oneClick, form, complained} {
		ids[to] = e.contact(ws, to, contacts.Fields{}).ID
	}
	// The one-click contact uses the link of a real marketing email.
	if st, ans := e.send(key, map[string]any{"to": oneClick, "sendPolicy": "news", "subject": "News", "htmlContent": "<p>news</p>"}); st != 201 {
		t.Fatalf("marketing send: %d %v", st, ans)
	}
	lu := e.waitMessage(oneClick).header.Get("List-Unsubscribe")
	oneClickLink := strings.TrimSuffix(strings.TrimPrefix(lu, "<"), ">")
	if !strings.HasPrefix(oneClickLink, e.h.URL+"/unsubscribe/") {
		t.Fatalf("List-Unsubscribe %q", lu)
	}
	link := func(to string) string {
		return email.UnsubscribeURL(e.h.URL, secret, email.Unsubscribe{Workspace: ws, Email: to, ContactID: ids[to]})
	}

	// The complaint first: the contact becomes COMPLAINED, so its link
	// later changes no status and fires nothing.
	st, ans := e.send(key, map[string]any{"to": complained, "subject": "Receipt", "htmlContent": "<p>r</p>"})
	if st != 201 {
		t.Fatalf("send: %d %v", st, ans)
	}
	msg := ans["id"].(string)
	e.waitStatus(key, msg, "sent")
	if st, ans := e.call("POST", "/api/providers/reports", key, map[string]any{"reports": []map[string]any{
		{"type": "complained", "messageId": msg}}}); st != 200 {
		t.Fatalf("complaint report: %d %v", st, ans)
	}
	if s := contactStatus(t, e, ws, complained); s != "COMPLAINED" {
		t.Fatalf("complained contact is %s", s)
	}
	if st := postUnsubscribe(t, link(complained), true); st != 200 {
		t.Fatalf("unsubscribe of the complained contact: %d", st)
	}

	if st := postUnsubscribe(t, oneClickLink, true); st != 200 {
		t.Fatalf("one-click unsubscribe: %d", st)
	}
	if st := postUnsubscribe(t, oneClickLink, false); st != 200 { // a second click
		t.Fatalf("repeated unsubscribe: %d", st)
	}
	if st := postUnsubscribe(t, link(form), false); st != 200 {
		t.Fatalf("unsubscribe by the page's form: %d", st)
	}
	for _, to := range []string{oneClick, form} {
		if s := contactStatus(t, e, ws, to); s != "UNSUBSCRIBED" {
			t.Errorf("%s is %s after unsubscribing", to, s)
		}
	}

	// Published before each answer: exactly two announcements, the
	// outbox rows deleted once acknowledged.
	envs := e.envelopes(schemas.TopicContacts, schemas.TypeContactUnsubscribed, ws)
	if len(envs) != 2 {
		t.Fatalf("%d contact.unsubscribed.v1 on the contacts topic, want 2 (one-click and form; none for the repeat or the complaint)", len(envs))
	}
	for _, env := range envs {
		var p schemas.ContactUnsubscribedPayload
		if err := json.Unmarshal(env.Payload, &p); err != nil || ids[p.Email] != p.ContactID || env.Key != ws+":"+p.ContactID || p.OccurredAt.IsZero() {
			t.Errorf("contact.unsubscribed.v1 %s: key %s (%v)", env.Payload, env.Key, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := e.outboxRows(ws, schemas.TypeContactUnsubscribed)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d contact outbox rows left after the announcements were published", n)
		}
		time.Sleep(50 * time.Millisecond)
	}

	got := recv.wait(t, "CONTACT_UNSUBSCRIBED", 2, 2*time.Second)
	if len(got) != 2 {
		t.Fatalf("%d CONTACT_UNSUBSCRIBED deliveries, want 2: %+v", len(got), got)
	}
	byEmail := map[string]hookBody{}
	for _, b := range got {
		byEmail[b.Data["email"].(string)] = b
	}
	for _, env := range envs {
		var p schemas.ContactUnsubscribedPayload
		_ = json.Unmarshal(env.Payload, &p)
		b, ok := byEmail[p.Email]
		if !ok {
			t.Errorf("no delivery for %s", p.Email)
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, b.Data["occurredAt"].(string))
		if b.ID != env.ID || b.TeamID != ws || b.Data["contactId"] != ids[p.Email] || err != nil || !at.Equal(p.OccurredAt) || len(b.Data) != 3 {
			t.Errorf("delivery %+v, want id %s and data %+v", b, env.ID, p)
		}
	}
	if _, ok := byEmail[complained]; ok {
		t.Errorf("CONTACT_UNSUBSCRIBED delivered for the contact that complained")
	}
}

// TestUnsubscribeEventSurvivesAFailedPublish: the unsubscribe writes its
// contact.unsubscribed.v1 into the contacts outbox in the transaction that
// changes the status; when publishing fails the page answers 503 saying
// the event will still be delivered, the row stays, a second click finds
// the contact unsubscribed and announces nothing, and the relay publishes
// the envelope once.
func TestUnsubscribeEventSurvivesAFailedPublish(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	ctx := context.Background()
	ws, _ := e.workspace(ingesttest.WorkspaceOpts{})
	to := uniq("relayed")
	c := e.contact(ws, to, contacts.Fields{})
	link := email.UnsubscribeURL(e.h.URL, secret, email.Unsubscribe{Workspace: ws, Email: to, ContactID: c.ID, MessageID: "m-1"})
	if err := e.h.Publisher.Close(); err != nil { // every publish of the server fails from here on
		t.Fatal(err)
	}
	resp, err := http.Post(link, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !bytes.Contains(body, []byte("will still be delivered")) {
		t.Fatalf("unsubscribe whose publish failed: %d %s", resp.StatusCode, body)
	}
	if s := contactStatus(t, e, ws, to); s != "UNSUBSCRIBED" {
		t.Fatalf("contact is %s", s)
	}
	if n := e.outboxRows(ws, schemas.TypeContactUnsubscribed); n != 1 {
		t.Fatalf("%d contact.unsubscribed.v1 outbox rows after the unsubscribe, want 1", n)
	}
	if st := postUnsubscribe(t, link, false); st != 200 {
		t.Fatalf("second click: %d, want 200 (nothing to announce)", st)
	}

	pub, err := pipeline.NewProducer(ctx, pipeline.ProducerConfig{Brokers: e.h.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for {
		n, err := e.contacts.RelayWorkspaceOnce(ctx, pub, ws, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if n := e.outboxRows(ws, schemas.TypeContactUnsubscribed); n != 0 {
		t.Fatalf("%d contact.unsubscribed.v1 outbox rows left after the relay", n)
	}
	envs := e.envelopes(schemas.TopicContacts, schemas.TypeContactUnsubscribed, ws)
	if len(envs) != 1 {
		t.Fatalf("%d contact.unsubscribed.v1 after the relay, want 1", len(envs))
	}
	var p schemas.ContactUnsubscribedPayload
	if err := json.Unmarshal(envs[0].Payload, &p); err != nil || p.ContactID != c.ID || p.Email != to || envs[0].CausationID != "m-1" {
		t.Errorf("relayed %s (causation %q): %v", envs[0].Payload, envs[0].CausationID, err)
	}
}

// TestFailedMessageFiresTransactionalFailedOnce (issue 25 item 3): a
// message the relay refuses (550) and one whose hand-off outcome is
// unknown (the answer lost) reach a REST hook subscribed to
// TRANSACTIONAL_FAILED once each, with the catalogue's data and the
// recorded reason, and never as TRANSACTIONAL_SENT; their send envelopes
// delivered again (as after a crash before the offsets were committed)
// return the same webhook envelope, and the receiver still gets each once.
func TestFailedMessageFiresTransactionalFailedOnce(t *testing.T) {
	e := newEnv(t, envOpts{smtp: smtptest.Options{
		Rcpt: func(to string) error {
			if strings.HasPrefix(to, "nouser") {
				return &gosmtp.SMTPError{Code: 550, EnhancedCode: gosmtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
			}
			return nil
		},
		Data: func(m smtptest.Message) error {
			if bytes.Contains(m.Data, []byte("Subject: drop me")) {
				return smtptest.DropConnection
			}
			return nil
		},
	}})
	e.runWebhookStages()
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	recv := newHookReceiver(t)
	e.subscribeHook(ws, "TRANSACTIONAL_FAILED", recv.url)
	e.subscribeHook(ws, "TRANSACTIONAL_SENT", recv.url)

	refused, lost := uniq("nouser"), uniq("lost")
	ids := map[string]string{}
	for to, subject := range map[string]string{refused: "hello", lost: "drop me"} {
		st, ans := e.send(key, map[string]any{"to": to, "subject": subject, "htmlContent": "<p>x</p>", "externalId": "ext-" + to})
		if st != 201 {
			t.Fatalf("send: %d %v", st, ans)
		}
		ids[to] = ans["id"].(string)
		e.waitStatus(key, ids[to], "failed")
	}
	got := recv.wait(t, "TRANSACTIONAL_FAILED", 2, 0)
	for _, b := range got {
		to, _ := b.Data["email"].(string)
		id := ids[to]
		reason, _ := b.Data["reason"].(string)
		wantReason := "550"
		if to == lost {
			wantReason = "outcome unknown"
		}
		if id == "" || b.ID != schemas.ChildID(id, schemas.TypeWebhookTransactionalFailed, 0) || b.TeamID != ws || b.Data["messageId"] != id ||
			b.Data["provider"] != "smtp" || b.Data["externalId"] != "ext-"+to || b.Data["rfcMessageId"] == nil || b.Data["occurredAt"] == nil ||
			!strings.Contains(reason, wantReason) {
			t.Errorf("TRANSACTIONAL_FAILED %+v", b)
		}
	}

	// Redeliver both send envelopes: the delivery stage finds the messages
	// failed and returns the same TRANSACTIONAL_FAILED envelopes again.
	var sends []schemas.Envelope
	for _, env := range e.envelopes(schemas.TopicTransactional, schemas.TypeTransactionalSend, ws) {
		if env.ID == ids[refused] || env.ID == ids[lost] {
			sends = append(sends, env)
		}
	}
	if len(sends) != 2 {
		t.Fatalf("%d send envelopes found, want 2", len(sends))
	}
	if err := e.h.Publisher.Publish(context.Background(), schemas.TopicTransactional, sends...); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(e.envelopes(schemas.TopicWebhooks, schemas.TypeWebhookTransactionalFailed, ws)) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the redelivered sends did not return TRANSACTIONAL_FAILED again (%d envelopes)",
				len(e.envelopes(schemas.TopicWebhooks, schemas.TypeWebhookTransactionalFailed, ws)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, env := range e.envelopes(schemas.TopicWebhooks, schemas.TypeWebhookTransactionalFailed, ws) {
		if env.ID != schemas.ChildID(env.CausationID, schemas.TypeWebhookTransactionalFailed, 0) {
			t.Errorf("TRANSACTIONAL_FAILED envelope %s of send %s: id not derived from the message", env.ID, env.CausationID)
		}
	}
	got = recv.wait(t, "TRANSACTIONAL_FAILED", 2, 3*time.Second)
	if len(got) != 2 {
		t.Errorf("%d TRANSACTIONAL_FAILED deliveries after the redelivery, want 2 (one per message): %+v", len(got), got)
	}
	if sent := recv.of("TRANSACTIONAL_SENT"); len(sent) != 0 {
		t.Errorf("TRANSACTIONAL_SENT delivered for failed messages: %+v", sent)
	}
}
