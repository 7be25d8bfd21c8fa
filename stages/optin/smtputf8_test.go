package optin_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/email/smtptest"
	"sendstream/stages/optin"
)

// TestConfirmationToNonASCIIAddress: the confirmation email of a contact
// whose address has a non-ASCII local part goes with SMTPUTF8 to a server
// offering it, its header otherwise ASCII (the list name RFC 2047-encoded),
// and fails for good, naming the extension and sending nothing, where the
// server does not offer it.
func TestConfirmationToNonASCIIAddress(t *testing.T) {
	ctx := context.Background()
	p := schemas.OptInRequestedPayload{Email: "jürgen@xn--exmple-cua.com", FirstName: "Jürgen", ListName: "Grüße",
		ConfirmURL: "http://x/confirm?token=t", ExpiresAt: time.Now().Add(time.Hour)}

	without := smtptest.Start(t, smtptest.Options{})
	m, err := optin.NewSMTP("smtp://" + without.Addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = optin.New(nil, m, optin.DefaultConfig()).Handle(ctx, optInEnv(t, p))
	if !pipeline.IsPermanent(err) || !strings.Contains(err.Error(), "SMTPUTF8") {
		t.Fatalf("to a server without SMTPUTF8: %v, want a permanent error naming SMTPUTF8", err)
	}
	if n := len(without.Messages()); n != 0 {
		t.Fatalf("%d messages reached the server without SMTPUTF8", n)
	}

	with := smtptest.Start(t, smtptest.Options{SMTPUTF8: true})
	if m, err = optin.NewSMTP("smtp://" + with.Addr); err != nil {
		t.Fatal(err)
	}
	if _, err := optin.New(nil, m, optin.DefaultConfig()).Handle(ctx, optInEnv(t, p)); err != nil {
		t.Fatalf("to a server with SMTPUTF8: %v", err)
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
}
