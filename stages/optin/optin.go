// Package optin is the stage that sends double opt-in confirmation emails:
// it reads contact.optin_requested.v1 envelopes from the contacts topic
// (published by the hosted sign-up form of ingest/contacts before it answers)
// and hands one message with the signed confirmation link to the mail server
// at SENDSTREAM_SMTP_URL. Other envelope types on the topic are skipped.
//
// Delivery is at least once: a message is recorded in optin_mail_sent by
// envelope id after the mail server accepted it, and an envelope already
// recorded is skipped, so only a crash between the two sends a duplicate.
package optin

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/mail"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/pipeline"
	"sendstream/schemas"
)

// Name is the stage's registered name.
const Name = "optin"

var (
	//go:embed sql/sent.sql
	sqlSent string
	//go:embed sql/record.sql
	sqlRecord string
)

func init() {
	pipeline.Register(pipeline.Spec[Config]{
		Name:     Name,
		Consumes: schemas.TopicOptIn,
		Defaults: DefaultConfig(),
		New: func(ctx context.Context, r pipeline.Resources, cfg Config) (pipeline.Stage, error) {
			if v := r.Settings["smtp_url"]; v != "" {
				cfg.SMTPURL = v
			}
			if v := r.Settings["smtp_from"]; v != "" {
				cfg.From = v
			}
			if err := cfg.Validate(); err != nil {
				return nil, err
			}
			m, err := NewSMTP(cfg.SMTPURL)
			if err != nil {
				return nil, err
			}
			return New(r.Postgres, m, cfg), nil
		},
	})
}

// Config configures the stage.
type Config struct {
	// SMTPURL is the mail server (Resources.Settings["smtp_url"], from
	// SENDSTREAM_SMTP_URL). Default smtp://127.0.0.1:1025.
	SMTPURL string
	// From is the sender of confirmation emails (Settings["smtp_from"]).
	From string
}

// DefaultConfig returns the configuration the registered stage starts from.
func DefaultConfig() Config {
	return Config{SMTPURL: "smtp://127.0.0.1:1025", From: "Sendstream <confirm@sendstream.localhost>"}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if _, err := mail.ParseAddress(c.From); err != nil {
		return fmt.Errorf("optin: from address %q: %w", c.From, err)
	}
	if c.SMTPURL == "" {
		return errors.New("optin: no SMTP URL")
	}
	return nil
}

// Stage sends confirmation emails. Handle is called from one goroutine at a
// time by the runner.
type Stage struct {
	pg      *pgxpool.Pool // nil: no dedup record (tests of the message alone)
	mail    Mailer
	from    *mail.Address
	breaker *pipeline.Breaker
}

var _ pipeline.Stage = (*Stage)(nil)

// New returns the stage over pg (for the sent record) and mailer.
func New(pg *pgxpool.Pool, mailer Mailer, cfg Config) *Stage {
	from, err := mail.ParseAddress(cfg.From)
	if err != nil {
		from = &mail.Address{Address: "confirm@sendstream.localhost"}
	}
	return &Stage{pg: pg, mail: mailer, from: from, breaker: pipeline.NewBreaker("optin-smtp")}
}

// Handle sends the confirmation email of one contact.optin_requested.v1
// envelope; other types are ignored. A malformed payload or a 5xx refusal
// is permanent (dead letter); anything else is retried by the runner.
func (s *Stage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	if env.Type != schemas.TypeOptInRequested {
		return nil, nil
	}
	var p schemas.OptInRequestedPayload
	if err := json.Unmarshal(env.Payload, &p); err != nil || p.Email == "" || p.ConfirmURL == "" {
		return nil, pipeline.Permanent(fmt.Errorf("optin %s: bad payload: %v", env.ID, err))
	}
	if s.pg != nil {
		var one int
		err := s.pg.QueryRow(ctx, sqlSent, env.ID).Scan(&one)
		if err == nil {
			return nil, nil // already handed to the mail server
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("optin %s: check sent record: %w", env.ID, err)
		}
	}
	msg := Compose(s.from, p, env.ID, time.Now())
	err := s.breaker.Do(ctx, func(ctx context.Context) error {
		return s.mail.Send(ctx, s.from.Address, []string{p.Email}, msg)
	})
	var perm *PermanentError
	if errors.As(err, &perm) {
		return nil, pipeline.Permanent(fmt.Errorf("optin %s: %w", env.ID, err))
	}
	if err != nil {
		return nil, fmt.Errorf("optin %s: %w", env.ID, err)
	}
	if s.pg != nil {
		if _, err := s.pg.Exec(ctx, sqlRecord, env.ID); err != nil {
			return nil, fmt.Errorf("optin %s: record sent: %w", env.ID, err)
		}
	}
	return nil, nil
}

// Compose builds the confirmation message: plain text and HTML
// alternatives, the link in both, and a Message-ID derived from the
// envelope id.
func Compose(from *mail.Address, p schemas.OptInRequestedPayload, envID string, now time.Time) []byte {
	greeting := "Hello,"
	if p.FirstName != "" {
		greeting = "Hello " + headerSafe(p.FirstName) + ","
	}
	subject := "Confirm your subscription to " + headerSafe(p.ListName)
	domain := from.Address[strings.LastIndexByte(from.Address, '@')+1:]
	boundary := "sendstream-" + envID
	var b strings.Builder
	h := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	h("From", from.String())
	h("To", (&mail.Address{Address: p.Email}).String())
	h("Subject", mime.QEncoding.Encode("utf-8", subject))
	h("Date", now.UTC().Format(time.RFC1123Z))
	h("Message-ID", "<optin."+envID+"@"+domain+">")
	h("MIME-Version", "1.0")
	h("Auto-Submitted", "auto-generated")
	h("Content-Type", `multipart/alternative; boundary="`+boundary+`"`)
	b.WriteString("\r\n")
	text := greeting + "\r\n\r\nPlease confirm your subscription to " + p.ListName + " by opening this link:\r\n\r\n" +
		p.ConfirmURL + "\r\n\r\nThe link works until " + p.ExpiresAt.UTC().Format("2 January 2006 15:04 MST") +
		". If you did not sign up, ignore this email and nothing will happen.\r\n"
	b.WriteString("--" + boundary + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	b.WriteString(text)
	b.WriteString("--" + boundary + "\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	b.WriteString("<p>" + htmlEscape(greeting) + "</p><p>Please confirm your subscription to <b>" + htmlEscape(p.ListName) +
		"</b>.</p><p><a href=\"" + htmlEscape(p.ConfirmURL) + "\">Confirm my subscription</a></p>" +
		"<p>If you did not sign up, ignore this email and nothing will happen.</p>\r\n")
	b.WriteString("--" + boundary + "--\r\n")
	return []byte(b.String())
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;").Replace(s)
}
