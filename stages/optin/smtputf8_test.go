package optin_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/stack"
	"sendstream/pipeline"
	"sendstream/pipeline/pipelinetest"
	"sendstream/schemas"
	"sendstream/sinks/email/smtptest"
	"sendstream/stages/delivery"
	"sendstream/stages/optin"
)

// deliver hands env to the optin stage and its output to a delivery stage
// sending to server, and returns the message's stored status and failure
// reason once delivery finished it.
func deliver(t *testing.T, pool *pgxpool.Pool, server *smtptest.Server, env schemas.Envelope) (status, reason string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := optin.New(pool).Handle(ctx, env)
	if err != nil || len(out) != 1 {
		t.Fatalf("optin: %v, %d envelopes", err, len(out))
	}
	cfg := delivery.DefaultConfig().FromSettings(map[string]string{"secret": "s", "smtp_url": "smtp://" + server.Addr + "?tls=none"})
	d, err := delivery.New(ctx, pipeline.Resources{Postgres: pool, Publisher: &pipelinetest.Publisher{}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Handle(ctx, out[0]); err != nil { // returns once the message is finished
		t.Fatalf("delivery: %v", err)
	}
	if err := pool.QueryRow(ctx, "SELECT status, coalesce(failure_reason, '') FROM transactional_messages WHERE id = $1", out[0].ID).Scan(&status, &reason); err != nil {
		t.Fatal(err)
	}
	return status, reason
}

// TestConfirmationToNonASCIIAddress: the confirmation email of a contact
// whose address has a non-ASCII local part goes with SMTPUTF8 to a server
// offering it, its header otherwise ASCII (the list name RFC 2047-encoded),
// and fails for good, naming the extension and sending nothing, where the
// server does not offer it.
func TestConfirmationToNonASCIIAddress(t *testing.T) {
	pool := stack.PG(t)
	ws := newWorkspace(t, pool)
	p := schemas.OptInRequestedPayload{Email: "jürgen@xn--exmple-cua.com", FirstName: "Jürgen", ListName: "Grüße",
		ConfirmURL: "http://x/confirm?token=t", ExpiresAt: time.Now().Add(time.Hour)}

	without := smtptest.Start(t, smtptest.Options{})
	status, reason := deliver(t, pool, without, optInEnv(t, ws, p))
	if status != schemas.MessageFailed || !strings.Contains(reason, "SMTPUTF8") {
		t.Fatalf("to a server without SMTPUTF8: %s %q, want failed naming SMTPUTF8", status, reason)
	}
	if n := len(without.Messages()); n != 0 {
		t.Fatalf("%d messages reached the server without SMTPUTF8", n)
	}

	with := smtptest.Start(t, smtptest.Options{SMTPUTF8: true})
	if status, reason := deliver(t, pool, with, optInEnv(t, ws, p)); status != schemas.MessageSent {
		t.Fatalf("to a server with SMTPUTF8: %s %q", status, reason)
	}
	got := with.Messages()
	if len(got) != 1 || !got[0].UTF8 || len(got[0].To) != 1 || got[0].To[0] != p.Email {
		t.Fatalf("received: %+v", got)
	}
	head := got[0].Data[:bytes.Index(got[0].Data, []byte("\r\n\r\n"))]
	for _, line := range bytes.Split(head, []byte("\r\n")) {
		if bytes.HasPrefix(line, []byte("To: ")) {
			if !bytes.Contains(line, []byte(p.Email)) {
				t.Errorf("To header %q", line)
			}
			continue
		}
		for _, c := range line {
			if c >= 0x80 {
				t.Fatalf("raw UTF-8 in header line %q", line)
			}
		}
	}
	if m := parse(t, got[0].Data); !strings.Contains(m.text, "Hello Jürgen,") || !strings.Contains(m.html, "<b>Grüße</b>") {
		t.Errorf("parts:\n%s\n%s", m.text, m.html)
	}
}

// TestConfirmationKeepsHeadersAndMarkupSafe: a first name or list name
// carrying line breaks, header lines or markup adds no header and no markup
// to the email; the link is in both parts.
func TestConfirmationKeepsHeadersAndMarkupSafe(t *testing.T) {
	pool := stack.PG(t)
	ws := newWorkspace(t, pool)
	p := schemas.OptInRequestedPayload{Email: "a@example.com", FirstName: "Eve\r\nBcc: victim@example.com <script>x</script>",
		ListName: "News\r\nX-Evil: 1 {{ data.confirmUrl }}", ConfirmURL: "http://site/confirm?token=abc&x=1", ExpiresAt: time.Now()}
	server := smtptest.Start(t, smtptest.Options{})
	if status, reason := deliver(t, pool, server, optInEnv(t, ws, p)); status != schemas.MessageSent {
		t.Fatalf("status %s %q", status, reason)
	}
	got := server.Messages()
	if len(got) != 1 || len(got[0].To) != 1 {
		t.Fatalf("received: %+v", got)
	}
	m := parse(t, got[0].Data)
	if m.header.Get("Bcc") != "" || m.header.Get("X-Evil") != "" {
		t.Errorf("injected headers: %v", m.header)
	}
	if strings.Contains(m.html, "<script>") || !strings.Contains(m.html, "&lt;script&gt;") {
		t.Errorf("markup of the first name not escaped:\n%s", m.html)
	}
	if !strings.Contains(m.header.Get("Subject"), "{{ data.confirmUrl }}") {
		t.Errorf("a list name was rendered as Liquid: subject %q", m.header.Get("Subject"))
	}
	if !strings.Contains(m.text, "http://site/confirm?token=abc&x=1") || !strings.Contains(m.html, `href="http://site/confirm?token=abc&amp;x=1"`) {
		t.Errorf("link missing:\n%s\n%s", m.text, m.html)
	}
}
