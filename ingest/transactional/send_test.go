package transactional_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"html"
	"strings"
	"testing"

	"github.com/emersion/go-msgauth/dkim"

	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/transactional"
	"sendstream/schemas"
	"sendstream/sinks/email"
)

// TestSendDeliversTheRenderedMessage follows one send from the HTTP answer
// to the bytes the SMTP server received: stored before answering, published,
// rendered with escaped values, multipart structure, attachments and inline
// image, cc/bcc/reply-to, DKIM signature, status, events and ClickHouse rows.
func TestSendDeliversTheRenderedMessage(t *testing.T) {
	e := newEnv(t, envOpts{})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{Name: "Acme & Co"})
	e.subscribeHook(ws, "TRANSACTIONAL_SENT", "https://hooks.example.com/in")
	ctx := context.Background()
	// A sending domain with a DKIM key.
	privPEM, txt, err := email.GenerateDKIMKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.AddDomain(ctx, ws, transactional.Domain{Domain: "acme.test", Selector: "s1", PrivateKey: privPEM}); err != nil {
		t.Fatal(err)
	}
	e.contact(ws, "ada@example.test", contacts.Fields{FirstName: ptr("Ada")})
	tpl := e.template(ws, transactional.Template{
		Name:      "receipt",
		Subject:   "Order {{ order.id }} for {{ contact.first_name }}",
		Preheader: "Thanks, {{ contact.first_name }} & welcome",
		HTML:      `<html><body><p>Hi {{ contact.first_name }}, your note: {{ note }}</p><ul>{% for i in data.items %}<li>{{ i.name }} x{{ i.qty }}</li>{% endfor %}</ul><img src="cid:logo"></body></html>`,
		Text:      "Hi {{ contact.first_name }}, note: {{ note }}\n{% for i in data.items %}- {{ i.name }} x{{ i.qty }}\n{% endfor %}",
		Required:  []string{"order.id"},
	})
	png := []byte("\x89PNG\r\n\x1a\n-logo-bytes-")
	pdf := bytes.Repeat([]byte("%PDF-1.7 receipt "), 100)
	st, ans := e.send(key, map[string]any{
		"to": "Ada@Example.test", "templateId": tpl, "externalId": "order-42",
		"data":        map[string]any{"order": map[string]any{"id": 42}, "note": `<script>alert("x")</script> & more`, "items": []any{map[string]any{"name": "Tea <green>", "qty": 2}}},
		"cc":          []string{"boss@example.test"},
		"bcc":         "audit@example.test",
		"replyTo":     "help@acme.test",
		"fromEmail":   "shop@acme.test",
		"attachments": []any{map[string]any{"filename": "receipt.pdf", "content": b64(pdf)}, map[string]any{"filename": "logo.png", "content": b64(png), "contentId": "logo"}},
	})
	if st != 201 {
		t.Fatalf("send: %d %v", st, ans)
	}
	id := ans["id"].(string)
	if ans["status"] != "queued" || ans["to"] != "ada@example.test" || ans["externalId"] != "order-42" || ans["deduplicated"] != false {
		t.Errorf("answer: %v", ans)
	}
	if id != schemas.IDFromKey(ws, schemas.TransactionalIDScope, "order-42") {
		t.Errorf("id %s is not derived from the externalId", id)
	}
	if ans["messageId"] != id+"@acme.test" || ans["contactId"] == nil {
		t.Errorf("messageId/contactId: %v", ans)
	}
	// Stored before the answer, and published (acks=all) before it.
	if s := e.pgStatus(id); s != "queued" && s != "sent" {
		t.Errorf("stored status right after the answer: %s", s)
	}
	if len(e.envelopes(schemas.TopicTransactional, schemas.TypeTransactionalSend, ws)) != 1 {
		t.Error("the send envelope was not on the topic when the answer came")
	}

	m := e.waitMessage("ada@example.test")
	want := []string{"multipart/mixed", " multipart/related", "  multipart/alternative", "   text/plain", "   text/html", "  image/png", " application/pdf"}
	if strings.Join(m.tree, "|") != strings.Join(want, "|") {
		t.Errorf("MIME tree %v, want %v", m.tree, want)
	}
	if m.subject() != "Order 42 for Ada" {
		t.Errorf("subject %q", m.subject())
	}
	html := string(m.leaf("text/html").body)
	for _, s := range []string{`your note: &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; more`, `<li>Tea &lt;green&gt; x2</li>`, `Thanks, Ada &amp; welcome</div>`, `<img src="cid:logo">`} {
		if !strings.Contains(html, s) {
			t.Errorf("html lacks %q:\n%s", s, html)
		}
	}
	if strings.Contains(html, "<script>") || strings.Contains(html, "Unsubscribe") {
		t.Errorf("html has raw script or a marketing footer:\n%s", html)
	}
	text := string(m.leaf("text/plain").body)
	if !strings.Contains(text, `note: <script>alert("x")</script> & more`) || !strings.Contains(text, "- Tea <green> x2") {
		t.Errorf("text part:\n%s", text)
	}
	if img := m.leaf("image/png"); img == nil || img.cid != "<logo>" || img.disposition != "inline" || !bytes.Equal(img.body, png) {
		t.Errorf("inline image: %+v", img)
	}
	if doc := m.leaf("application/pdf"); doc == nil || doc.filename != "receipt.pdf" || doc.disposition != "attachment" || !bytes.Equal(doc.body, pdf) {
		t.Errorf("attachment: %+v", doc)
	}
	for h, v := range map[string]string{"To": "ada@example.test", "Cc": "boss@example.test", "Reply-To": "help@acme.test",
		"From": "shop@acme.test", "Message-Id": "<" + id + "@acme.test>", "X-Sendstream-Message-Id": id, "Bcc": ""} {
		if got := m.header.Get(h); got != v {
			t.Errorf("header %s = %q, want %q", h, got, v)
		}
	}
	if got := strings.Join(m.raw.To, ","); got != "ada@example.test,boss@example.test,audit@example.test" || m.raw.From != "shop@acme.test" {
		t.Errorf("envelope: from %s rcpt %s", m.raw.From, got)
	}
	// DKIM: verifies against the domain's published key.
	vs, err := dkim.VerifyWithOptions(bytes.NewReader(m.raw.Data), &dkim.VerifyOptions{LookupTXT: func(d string) ([]string, error) {
		if d != "s1._domainkey.acme.test" {
			t.Errorf("dkim lookup %s", d)
		}
		return []string{txt}, nil
	}})
	if err != nil || len(vs) != 1 || vs[0].Err != nil {
		t.Errorf("dkim: %v %+v", err, vs)
	}
	blk, _ := pem.Decode([]byte(privPEM))
	if k, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err != nil || k == nil {
		t.Errorf("stored key: %v", err)
	}

	got := e.waitStatus(key, id, "sent")
	if got["sentAt"] == nil || got["messageId"] != id+"@acme.test" || got["failureReason"] != nil {
		t.Errorf("status: %v", got)
	}
	evs, _ := got["events"].([]any)
	if len(evs) != 2 || evs[0].(map[string]any)["status"] != "queued" || evs[1].(map[string]any)["status"] != "sent" {
		t.Errorf("events: %v", got["events"])
	}
	if _, byExt := e.status(key, "ext:order-42"); byExt["id"] != id {
		t.Errorf("status by ext: %v", byExt)
	}
	hooks := e.waitEnvelopes(schemas.TopicWebhooks, schemas.TypeWebhookTransactionalSent, ws, 1)
	if len(hooks) != 1 || !strings.Contains(string(hooks[0].Payload), `"messageId":"`+id+`"`) {
		t.Errorf("TRANSACTIONAL_SENT envelopes: %v", hooks)
	}
	if rows := e.chStatuses(ws, id, 2); strings.Join(rows, ",") != "queued,sent" {
		t.Errorf("clickhouse rows: %v", rows)
	}
	// The request log names what the call produced.
	for _, rl := range e.h.RequestLogs(t, ws) {
		if rl.Path == "/api/v1/transactional/send" && (len(rl.Produced.MessageIDs) != 1 || rl.Produced.MessageIDs[0] != id || rl.Produced.ExternalID != "order-42" || rl.Produced.Recipient != "ada@example.test") {
			t.Errorf("request log produced: %+v", rl.Produced)
		}
		if strings.Contains(string(rl.RequestBody), b64(pdf)[:40]) {
			t.Error("attachment content in the request log")
		}
	}
}

// TestRepeatedInlineHTMLDeliversEachMessage: sends that repeat a long inline
// HTML source (kept decoded and encoded by the source cache after the
// first) each deliver the source rendered with their own data.
func TestRepeatedInlineHTMLDeliversEachMessage(t *testing.T) {
	e := newEnv(t, envOpts{})
	_, key := e.workspace(ingesttest.WorkspaceOpts{})
	src := `<div style="font-family:Arial">` + strings.Repeat(`<p class="row">Dear {{ name }} & "friends", é</p>`, 20) + `</div>`
	for i, name := range []string{"Ada <1>", "Grace & 2", "Linus"} {
		to := fmt.Sprintf("repeat%d@example.test", i)
		if st, ans := e.send(key, map[string]any{"to": to, "subject": "Hi {{ name }}", "htmlContent": src,
			"data": map[string]any{"name": name}}); st != 201 {
			t.Fatalf("send %d: %d %v", i, st, ans)
		}
		m := e.waitMessage(to)
		want := strings.ReplaceAll(src, "{{ name }}", html.EscapeString(name))
		if got := string(m.leaf("text/html").body); got != want {
			t.Fatalf("send %d: HTML\n%s\nwant\n%s", i, got, want)
		}
		if m.subject() != "Hi "+name {
			t.Errorf("send %d: subject %q", i, m.subject())
		}
	}
}
