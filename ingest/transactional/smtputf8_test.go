package transactional_test

import (
	"bytes"
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"

	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
	"sendstream/sinks/email/smtptest"
)

// TestSendToNonASCIIAddressWithSMTPUTF8: a send to a non-ASCII local part
// on an internationalised domain answers the stored form of the address
// (NFC, lower-cased, the domain in IDNA ASCII), and reaches a relay that
// offers SMTPUTF8 in an SMTPUTF8 transaction with that address; the header
// holds no other raw UTF-8 (the subject and the sender's name are RFC 2047
// words). An ASCII recipient on the same relay goes without SMTPUTF8, and
// the list's ?to= finds it by any spelling of the address.
func TestSendToNonASCIIAddressWithSMTPUTF8(t *testing.T) {
	e := newEnv(t, envOpts{smtp: smtptest.Options{SMTPUTF8: true}})
	_, key := e.workspace(ingesttest.WorkspaceOpts{})
	const stored = "jürgen@xn--exmple-cua.test"
	st, ans := e.send(key, map[string]any{"to": "Ju\u0308rgen@EXÄMPLE.test", "subject": "Grüße, {{ name }}",
		"htmlContent": "<p>Hallo {{ name }}</p>", "data": map[string]any{"name": "Jürgen"}})
	if st != 201 || ans["to"] != stored {
		t.Fatalf("send: %d %v, want 201 to %s", st, ans, stored)
	}
	e.waitStatus(key, ans["id"].(string), "sent")
	st, ascii := e.send(key, map[string]any{"to": "ann@exämple.test", "subject": "Hi", "htmlContent": "<p>hi</p>"})
	if st != 201 || ascii["to"] != "ann@xn--exmple-cua.test" {
		t.Fatalf("ASCII send: %d %v", st, ascii)
	}
	e.waitStatus(key, ascii["id"].(string), "sent")
	// The list filters by the stored form: any spelling finds the message,
	// an address the rule refuses is a 400.
	st, list := e.call("GET", "/api/v1/transactional?to="+url.QueryEscape("ANN@EXÄMPLE.test"), key, nil)
	if msgs, _ := list["messages"].([]any); st != 200 || len(msgs) != 1 || msgs[0].(map[string]any)["id"] != ascii["id"] {
		t.Errorf("list ?to= in the Unicode spelling: %d %v", st, list)
	}
	st, list = e.call("GET", "/api/v1/transactional?to="+url.QueryEscape("ann\u202e@example.test"), key, nil)
	if fields, _ := list["fields"].([]any); st != 400 || len(fields) != 1 || fields[0] != "to" {
		t.Errorf("list ?to= with a bidi override: %d %v", st, list)
	}

	var utf8, plain *smtptest.Message
	for _, m := range e.smtp.Messages() {
		switch {
		case slices.Equal(m.To, []string{stored}):
			utf8 = &m
		case slices.Equal(m.To, []string{"ann@xn--exmple-cua.test"}):
			plain = &m
		}
	}
	if utf8 == nil || plain == nil {
		t.Fatalf("messages at the relay: %+v", e.smtp.Messages())
	}
	if !utf8.UTF8 || plain.UTF8 {
		t.Errorf("SMTPUTF8: %v for the non-ASCII recipient, %v for the ASCII one; want true, false", utf8.UTF8, plain.UTF8)
	}
	p := parse(t, *utf8)
	if p.header.Get("To") != stored || p.subject() != "Grüße, Jürgen" {
		t.Errorf("To %q, subject %q", p.header.Get("To"), p.subject())
	}
	head := utf8.Data[:bytes.Index(utf8.Data, []byte("\r\n\r\n"))]
	for _, line := range bytes.Split(head, []byte("\r\n")) {
		if !bytes.HasPrefix(line, []byte("To: ")) && schemas.HasNonASCII(string(line)) {
			t.Errorf("raw UTF-8 in header line %q", line)
		}
	}
}

// TestSendToNonASCIIAddressWithoutSMTPUTF8: where the relay does not offer
// SMTPUTF8 the message fails for good with a reason naming the address and
// the missing extension, nothing reaches the relay, and the relay keeps
// taking ASCII messages.
func TestSendToNonASCIIAddressWithoutSMTPUTF8(t *testing.T) {
	e := newEnv(t, envOpts{})
	_, key := e.workspace(ingesttest.WorkspaceOpts{})
	st, ans := e.send(key, map[string]any{"to": "jürgen@example.test", "subject": "Hi", "htmlContent": "<p>hi</p>"})
	if st != 201 {
		t.Fatalf("send: %d %v", st, ans)
	}
	got := e.waitStatus(key, ans["id"].(string), "failed")
	reason, _ := got["failureReason"].(string)
	if !strings.Contains(reason, "SMTPUTF8") || !strings.Contains(reason, "does not offer") || !strings.Contains(reason, "jürgen@example.test") {
		t.Fatalf("failure reason %q does not name the address and the missing SMTPUTF8", reason)
	}
	st, ok := e.send(key, map[string]any{"to": "ann@example.test", "subject": "Hi", "htmlContent": "<p>hi</p>"})
	if st != 201 {
		t.Fatalf("ASCII send: %d %v", st, ok)
	}
	e.waitStatus(key, ok["id"].(string), "sent")
	msgs := e.smtp.Messages()
	if len(msgs) != 1 || !slices.Equal(msgs[0].To, []string{"ann@example.test"}) {
		t.Fatalf("messages at the relay: %+v", msgs)
	}
}

// TestSendRefusesInvisibleAddresses: every address of a send (to, cc, bcc,
// replyTo, fromEmail) with a bidi control, a zero-width or other invisible
// character, a fullwidth local part or a domain IDNA refuses gets 400
// validation_error with fields naming it, and nothing is stored; so does a
// contentId that is not printable ASCII (it becomes a header).
func TestSendRefusesInvisibleAddresses(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	bad := []string{"a\u202e@example.test", "a\u200b@example.test", "\ufeffa@example.test", "a@exa\u200dmple.test",
		"a\u00ad@example.test", "ａ@example.test", "a@xn--zz.test"}
	for _, addr := range bad {
		for field, want := range map[string]string{"to": "to", "cc": "cc[0]", "bcc": "bcc[0]", "replyTo": "replyTo", "fromEmail": "fromEmail"} {
			body := map[string]any{"to": "ok@example.test", "subject": "s", "htmlContent": "<p>x</p>", field: addr}
			st, ans := e.send(key, body)
			fields, _ := ans["fields"].([]any)
			if st != 400 || ans["code"] != "validation_error" || len(fields) != 1 || fields[0] != want {
				t.Errorf("%s %q: %d %v, want 400 validation_error fields [%s]", field, addr, st, ans, want)
			}
		}
	}
	st, ans := e.send(key, map[string]any{"to": "ok@example.test", "subject": "s", "htmlContent": "<p>x</p>",
		"attachments": []any{map[string]any{"filename": "a.png", "content": "aGk=", "contentId": "logö"}}})
	if fields, _ := ans["fields"].([]any); st != 400 || len(fields) != 1 || fields[0] != "attachments[0].contentId" {
		t.Errorf("non-ASCII contentId: %d %v", st, ans)
	}
	var n int
	if err := e.pg.QueryRow(context.Background(), "SELECT count(*) FROM transactional_messages WHERE workspace_id = $1", ws).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d messages stored from refused sends (%v)", n, err)
	}
}
