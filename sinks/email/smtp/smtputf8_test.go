package smtp

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"sendstream/sinks/email"
	"sendstream/sinks/email/smtptest"
)

// utf8Msg is a message from a@x.test to rcpts whose header may name a
// non-ASCII Reply-To.
func utf8Msg(id, replyTo string, rcpts ...string) *email.Message {
	m := msg(id, rcpts...)
	if replyTo != "" {
		m.Raw = append([]byte("Reply-To: "+replyTo+"\r\n"), m.Raw...)
	}
	return m
}

// TestSMTPUTF8WhereOffered: a relay offering SMTPUTF8 gets the parameter
// on MAIL FROM for a message with a non-ASCII address, in the one-round-trip
// chunked transaction and in the pipelined one, and only for such messages.
func TestSMTPUTF8WhereOffered(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{SMTPUTF8: true})
	p := newProvider(t, Config{Addr: srv.Addr, TLS: TLSNone, PoolSize: 1})
	ctx := smtptest.Ctx(t, 30*time.Second)
	for _, m := range []*email.Message{
		utf8Msg("chunked", "", "jürgen@xn--exmple-cua.test"),
		utf8Msg("pipelined", "", "to@y.test", "用户@y.test"),
		utf8Msg("header", "jürgen@y.test", "to@y.test"),
		utf8Msg("ascii", "", "to@y.test"),
	} {
		if _, err := p.Send(ctx, m); err != nil {
			t.Fatalf("send %s: %v", m.ID, err)
		}
	}
	got := srv.Messages()
	if len(got) != 4 {
		t.Fatalf("%d messages at the relay, want 4", len(got))
	}
	want := []bool{true, true, true, false}
	for i, m := range got {
		if m.UTF8 != want[i] {
			t.Errorf("message %d (to %v): SMTPUTF8 %v, want %v", i, m.To, m.UTF8, want[i])
		}
	}
	if got[0].To[0] != "jürgen@xn--exmple-cua.test" || got[1].To[1] != "用户@y.test" {
		t.Errorf("recipients as received: %v, %v", got[0].To, got[1].To)
	}
	if !bytes.Contains(got[0].Data, []byte("To: jürgen@xn--exmple-cua.test\r\n")) {
		t.Errorf("the header lost the UTF-8 address: %q", got[0].Data)
	}
}

// TestSMTPUTF8NotOffered: to a relay without the extension a message with
// a non-ASCII address is refused for good with a reason naming the address
// and the extension, nothing is sent, the breaker stays closed and the
// connection serves the next message.
func TestSMTPUTF8NotOffered(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	p := newProvider(t, Config{Addr: srv.Addr, TLS: TLSNone, PoolSize: 1})
	ctx := smtptest.Ctx(t, 30*time.Second)
	for range 5 {
		for _, m := range []*email.Message{
			utf8Msg("chunked", "", "jürgen@y.test"),
			utf8Msg("cc", "", "to@y.test", "jürgen@y.test"),
			utf8Msg("header", "jürgen@y.test", "to@y.test"),
		} {
			_, err := p.Send(ctx, m)
			if !email.IsRefused(err) {
				t.Fatalf("send %s: %v, want a refusal", m.ID, err)
			}
			if !strings.Contains(err.Error(), "SMTPUTF8") || !strings.Contains(err.Error(), "does not offer") {
				t.Fatalf("send %s: reason %q does not name the missing extension", m.ID, err)
			}
			if m.ID != "header" && !strings.Contains(err.Error(), "jürgen@y.test") {
				t.Fatalf("send %s: reason %q does not name the address", m.ID, err)
			}
		}
	}
	if p.Blocked() {
		t.Error("refusals for SMTPUTF8 opened the breaker")
	}
	if n := len(srv.Messages()); n != 0 {
		t.Fatalf("%d messages reached the relay", n)
	}
	if _, err := p.Send(ctx, msg("ascii", "to@y.test")); err != nil {
		t.Fatalf("an ASCII message after the refusals: %v", err)
	}
	if got := srv.Messages(); len(got) != 1 || got[0].UTF8 {
		t.Fatalf("messages at the relay: %+v", got)
	}
	if n := srv.Connections(); n != 1 {
		t.Errorf("%d connections, want the one reused", n)
	}
}

// TestNeedsSMTPUTF8: envelope addresses and the header section count; the
// body does not.
func TestNeedsSMTPUTF8(t *testing.T) {
	for _, tc := range []struct {
		m    email.Message
		want bool
	}{
		{email.Message{From: "a@x.test", Recipients: []string{"b@y.test"}, Raw: []byte("To: b@y.test\r\n\r\nbody ü\r\n")}, false},
		{email.Message{From: "ä@x.test", Recipients: []string{"b@y.test"}, Raw: []byte("To: b@y.test\r\n\r\n")}, true},
		{email.Message{From: "a@x.test", Recipients: []string{"b@y.test", "ü@y.test"}, Raw: []byte("To: b@y.test\r\n\r\n")}, true},
		{email.Message{From: "a@x.test", Recipients: []string{"b@y.test"}, Raw: []byte("Reply-To: ü@y.test\r\nTo: b@y.test\r\n\r\n")}, true},
	} {
		if got := tc.m.NeedsSMTPUTF8(); got != tc.want {
			t.Errorf("%+v: NeedsSMTPUTF8 %v, want %v", tc.m, got, tc.want)
		}
	}
}
