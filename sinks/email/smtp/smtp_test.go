package smtp

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"
	"github.com/prometheus/client_golang/prometheus"

	"sendstream/sinks/breaker"
	"sendstream/sinks/email"
	"sendstream/sinks/email/smtptest"
)

func msg(id string, rcpts ...string) *email.Message {
	raw := []byte("From: a@x.test\r\nTo: " + rcpts[0] + "\r\nSubject: " + id + "\r\nMessage-ID: <" + id + "@x.test>\r\n\r\nhello " + id + "\r\n.leading dot\r\n")
	return &email.Message{ID: id, From: "a@x.test", Recipients: rcpts, Raw: raw}
}

func newProvider(t *testing.T, cfg Config) *Provider {
	t.Helper()
	if cfg.Breaker == nil {
		cfg.Breaker = breaker.Config{ConsecutiveFailures: 3, OpenFor: 300 * time.Millisecond, Metrics: prometheus.NewRegistry()}.New("smtp test " + t.Name())
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 5 * time.Millisecond
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestSendsReusingConnections(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	p := newProvider(t, Config{Addr: srv.Addr, TLS: TLSNone, PoolSize: 2})
	ctx := smtptest.Ctx(t, 30*time.Second)
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.Send(ctx, msg(fmt.Sprint("m", i), "to@y.test", "cc@y.test")); err != nil {
				t.Errorf("send: %v", err)
			}
		}()
	}
	wg.Wait()
	got := srv.Messages()
	if len(got) != 40 {
		t.Fatalf("server got %d messages, want 40", len(got))
	}
	if n := srv.Connections(); n > 2 {
		t.Errorf("%d connections for 40 messages with a pool of 2", n)
	}
	m := got[0]
	if m.From != "a@x.test" || len(m.To) != 2 || !bytes.Contains(m.Data, []byte("\r\n.leading dot\r\n")) {
		t.Errorf("message as received: %+v %q", m, m.Data)
	}
}

func TestStartTLSAndAuth(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{TLS: true, Username: "u", Password: "p w"})
	ctx := smtptest.Ctx(t, 30*time.Second)
	p := newProvider(t, Config{Addr: srv.Addr, TLS: TLSStartTLS, Username: "u", Password: "p w",
		TLSConfig: &tls.Config{RootCAs: srv.CertPool, ServerName: "127.0.0.1"}})
	if _, err := p.Send(ctx, msg("tls", "to@y.test")); err != nil {
		t.Fatalf("send over STARTTLS with AUTH: %v", err)
	}
	// Opportunistic mode finds the offer and upgrades too.
	p2 := newProvider(t, Config{Addr: srv.Addr, Username: "u", Password: "p w",
		TLSConfig: &tls.Config{RootCAs: srv.CertPool, ServerName: "127.0.0.1"}})
	if _, err := p2.Send(ctx, msg("opp", "to@y.test")); err != nil {
		t.Fatalf("send opportunistic: %v", err)
	}
	for _, m := range srv.Messages() {
		if !m.TLS || m.User != "u" {
			t.Errorf("message %q: tls=%v user=%q", m.Data[:20], m.TLS, m.User)
		}
	}
	// Wrong password: not a refusal of the message, a retryable failure.
	p3 := newProvider(t, Config{Addr: srv.Addr, TLS: TLSStartTLS, Username: "u", Password: "bad", MaxAttempts: 1,
		TLSConfig: &tls.Config{RootCAs: srv.CertPool, ServerName: "127.0.0.1"}})
	if _, err := p3.Send(ctx, msg("bad", "to@y.test")); err == nil || email.IsRefused(err) {
		t.Errorf("bad credentials: err = %v", err)
	}
	// URL form.
	cfg, err := ParseURL("smtps://user:secret@mail.example.com?pool=3&helo=me.example.com")
	if err != nil || cfg.Addr != "mail.example.com:465" || cfg.TLS != TLSImplicit || cfg.PoolSize != 3 || cfg.Password != "secret" || cfg.Helo != "me.example.com" {
		t.Errorf("ParseURL: %+v %v", cfg, err)
	}
	if _, err := ParseURL("http://x"); err == nil {
		t.Error("ParseURL accepted http://")
	}
}

func TestRefusalsAndSecondaryRecipients(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{
		Rcpt: func(to string) error {
			if to == "nobody@y.test" || to == "badcc@y.test" {
				return &gosmtp.SMTPError{Code: 550, EnhancedCode: gosmtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
			}
			return nil
		},
		Data: func(m smtptest.Message) error {
			if bytes.Contains(m.Data, []byte("Subject: spam")) {
				return &gosmtp.SMTPError{Code: 554, EnhancedCode: gosmtp.EnhancedCode{5, 7, 1}, Message: "looks like spam"}
			}
			return nil
		},
	})
	p := newProvider(t, Config{Addr: srv.Addr, TLS: TLSNone, PoolSize: 1})
	ctx := smtptest.Ctx(t, 30*time.Second)
	_, err := p.Send(ctx, msg("x", "nobody@y.test"))
	var r *email.RefusedError
	if !errors.As(err, &r) || !bytes.Contains([]byte(r.Reason), []byte("550")) {
		t.Errorf("refused primary recipient: %v", err)
	}
	rec, err := p.Send(ctx, msg("ok", "to@y.test", "badcc@y.test", "bcc@y.test"))
	if err != nil || len(rec.Refused) != 1 || rec.Refused[0] != "badcc@y.test" {
		t.Errorf("secondary refusal: %+v %v", rec, err)
	}
	if _, err := p.Send(ctx, msg("spam", "to@y.test")); !email.IsRefused(err) {
		t.Errorf("554 at end of data: %v", err)
	}
	// Refusals do not trip the breaker and the connection stays usable.
	for i := 0; i < 5; i++ {
		_, _ = p.Send(ctx, msg("y", "nobody@y.test"))
	}
	if p.Blocked() {
		t.Error("refusals opened the breaker")
	}
	if _, err := p.Send(ctx, msg("after", "to@y.test")); err != nil {
		t.Errorf("send after refusals: %v", err)
	}
	if got := len(srv.Messages()); got != 2 {
		t.Errorf("server accepted %d messages, want 2", got)
	}
	if n := srv.Connections(); n != 1 {
		t.Errorf("%d connections, want the one reused", n)
	}
}

func TestTransientEndOfDataIsRetriedAndLostReplyIsNot(t *testing.T) {
	var mu sync.Mutex
	fails := map[string]int{}
	srv := smtptest.Start(t, smtptest.Options{Data: func(m smtptest.Message) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case bytes.Contains(m.Data, []byte("Subject: busy")) && fails["busy"] < 1:
			fails["busy"]++
			return &gosmtp.SMTPError{Code: 451, EnhancedCode: gosmtp.EnhancedCode{4, 3, 0}, Message: "try later"}
		case bytes.Contains(m.Data, []byte("Subject: drop")):
			fails["drop"]++
			return smtptest.DropConnection
		}
		return nil
	}})
	p := newProvider(t, Config{Addr: srv.Addr, TLS: TLSNone})
	ctx := smtptest.Ctx(t, 30*time.Second)
	if _, err := p.Send(ctx, msg("busy", "to@y.test")); err != nil {
		t.Fatalf("451 then success: %v", err)
	}
	_, err := p.Send(ctx, msg("drop", "to@y.test"))
	if !email.IsUnknownOutcome(err) {
		t.Errorf("lost reply: err = %v, want unknown outcome", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fails["drop"] != 1 {
		t.Errorf("a transmission with a lost reply was retried: %d transmissions", fails["drop"])
	}
}

func TestServerDownOpensBreakerAndRecovers(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	p := newProvider(t, Config{Addr: srv.Addr, TLS: TLSNone, MaxAttempts: 1})
	ctx := smtptest.Ctx(t, 30*time.Second)
	if _, err := p.Send(ctx, msg("before", "to@y.test")); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	var opened bool
	for i := 0; i < 10; i++ {
		_, err := p.Send(ctx, msg("down", "to@y.test"))
		if err == nil || email.IsRefused(err) || email.IsUnknownOutcome(err) {
			t.Fatalf("send while down: %v (want a retryable error)", err)
		}
		if errors.Is(err, breaker.ErrOpen) {
			opened = true
			break
		}
	}
	if !opened || !p.Blocked() {
		t.Fatal("breaker did not open while the server was down")
	}
	srv.Restart(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := p.Send(ctx, msg("after", "to@y.test"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(srv.Messages()); n != 2 {
		t.Errorf("server has %d messages, want 2 (nothing sent twice or while down)", n)
	}
}
