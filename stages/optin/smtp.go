package optin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"sendstream/sinks/email"
)

// Mailer hands one message to a mail server. Send returns once the server
// accepted the message; a *PermanentError means it refused it for good (a
// 5xx answer) and retrying cannot help.
type Mailer interface {
	Send(ctx context.Context, from string, to []string, msg []byte) error
}

// PermanentError is a 5xx refusal from the mail server.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// SMTP is a minimal SMTP Mailer over net/smtp, one connection per message:
// smtp://[user:password@]host:port, with STARTTLS when the server offers it
// (verified against host; ?tls=skip-verify for a local relay) and PLAIN
// authentication when the URL has a user. smtps://host:port uses implicit
// TLS. It is safe for concurrent use.
type SMTP struct {
	addr     string
	host     string
	implicit bool
	insecure bool
	auth     smtp.Auth
	timeout  time.Duration
}

var _ Mailer = (*SMTP)(nil)

// NewSMTP parses an SMTP URL (see SMTP); it does not connect.
func NewSMTP(rawURL string) (*SMTP, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("smtp url: %w", err)
	}
	if u.Scheme != "smtp" && u.Scheme != "smtps" {
		return nil, fmt.Errorf("smtp url %q: scheme must be smtp or smtps", rawURL)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return nil, fmt.Errorf("smtp url %q: no host", rawURL)
	}
	if port == "" {
		port = map[bool]string{true: "465", false: "25"}[u.Scheme == "smtps"]
	}
	m := &SMTP{addr: net.JoinHostPort(host, port), host: host, implicit: u.Scheme == "smtps",
		insecure: u.Query().Get("tls") == "skip-verify", timeout: 30 * time.Second}
	if u.User != nil {
		pw, _ := u.User.Password()
		m.auth = smtp.PlainAuth("", u.User.Username(), pw, host)
	}
	return m, nil
}

// Send delivers msg (a complete RFC 5322 message with CRLF line ends) from
// from to every address of to.
func (m *SMTP) Send(ctx context.Context, from string, to []string, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.addr)
	if err != nil {
		return fmt.Errorf("smtp dial %s: %w", m.addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	tcfg := &tls.Config{ServerName: m.host, InsecureSkipVerify: m.insecure} //nolint:gosec // opt-in for local relays
	if m.implicit {
		conn = tls.Client(conn, tcfg)
	}
	c, err := smtp.NewClient(conn, m.host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("smtp %s: greeting: %w", m.addr, classify(err))
	}
	defer c.Close()
	if err := c.Hello("localhost"); err != nil {
		return fmt.Errorf("smtp %s: EHLO: %w", m.addr, classify(err))
	}
	if ok, _ := c.Extension("STARTTLS"); ok && !m.implicit {
		if err := c.StartTLS(tcfg); err != nil {
			return fmt.Errorf("smtp %s: STARTTLS: %w", m.addr, classify(err))
		}
	}
	if m.auth != nil {
		if err := c.Auth(m.auth); err != nil {
			return fmt.Errorf("smtp %s: AUTH: %w", m.addr, classify(err))
		}
	}
	if (&email.Message{From: from, Recipients: to, Raw: msg}).NeedsSMTPUTF8() {
		// net/smtp adds the SMTPUTF8 parameter when the server offers it;
		// without it a non-ASCII address must not be sent at all.
		if ok, _ := c.Extension("SMTPUTF8"); !ok {
			return &PermanentError{Err: fmt.Errorf("smtp %s: a non-ASCII address needs SMTPUTF8 (RFC 6531), which the server does not offer; nothing was sent", m.addr)}
		}
	}
	if err := c.Mail(from); err != nil {
		return fmt.Errorf("smtp %s: MAIL FROM: %w", m.addr, classify(err))
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			return fmt.Errorf("smtp %s: RCPT TO: %w", m.addr, classify(err))
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp %s: DATA: %w", m.addr, classify(err))
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("smtp %s: write message: %w", m.addr, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp %s: end of data: %w", m.addr, classify(err))
	}
	_ = c.Quit()
	return nil
}

// classify wraps 5xx answers in *PermanentError.
func classify(err error) error {
	var te *textproto.Error
	if errors.As(err, &te) && te.Code >= 500 && te.Code < 600 {
		return &PermanentError{Err: err}
	}
	return err
}

// headerSafe drops CR and LF so a value cannot start a new header.
func headerSafe(s string) string {
	return strings.NewReplacer("\r", "", "\n", "").Replace(s)
}
