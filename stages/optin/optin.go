// Package optin is the stage that turns a double opt-in request into its
// confirmation email: it reads contact.optin_requested.v1 envelopes from
// sendstream.optin.v1 (published by the hosted sign-up form of
// ingest/contacts before it answers) and returns, for the runner to
// publish, one transactional.send.v1 envelope on the transactional topic.
// Other envelope types are skipped.
//
// The confirmation is a transactional message of the workspace like any
// other, so there is one mail path: it is stored queued in
// transactional_messages (listed by GET /v1/transactional, its status
// readable), the delivery stage renders it, builds it (sinks/email.Build),
// signs it with the DKIM key of the sender's domain and hands it to the
// provider of the workspace's default Transactional policy (sinks/email:
// pooled connections, circuit breaker, SMTPUTF8 rules), and the messagelog
// stage records queued → sent | failed in ClickHouse. The sender is the one
// a send without fromEmail gets (email.DefaultSender): the default policy's
// fromEmail, else noreply@ the workspace's first domain, else
// noreply@sendstream.local.
//
// Idempotent by envelope id: the message id derives from it
// (schemas.ChildID), the row is stored ON CONFLICT DO NOTHING and the
// envelope published again on a replay; the delivery stage claims each
// message once, so a replay never sends a second copy.
package optin

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/pipeline"
	"sendstream/schemas"
	"sendstream/sinks/email"
)

// Name is the stage's registered name.
const Name = "optin"

var (
	//go:embed sql/sender.sql
	sqlSender string
	//go:embed sql/store.sql
	sqlStore string
)

func init() {
	pipeline.Register(pipeline.Spec[struct{}]{
		Name:     Name,
		Consumes: schemas.TopicOptIn,
		Produces: []string{schemas.TopicTransactional},
		New: func(ctx context.Context, r pipeline.Resources, _ struct{}) (pipeline.Stage, error) {
			if r.Postgres == nil {
				return nil, errors.New("optin: needs Postgres")
			}
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("optin: build: %w", err)
			}
			return New(r.Postgres), nil
		},
	})
}

// The confirmation email as Liquid sources, rendered by the delivery stage
// with the data of Message: values are never part of a source, and every
// {{ … }} of the HTML part is HTML-escaped there.
const (
	Subject = "Confirm your subscription to {{ data.listName }}"
	HTML    = `<p>{{ data.greeting }}</p><p>Please confirm your subscription to <b>{{ data.listName }}</b>.</p>` +
		`<p><a href="{{ data.confirmUrl }}">Confirm my subscription</a></p>` +
		`<p>The link works until {{ data.expiresAt }}. If you did not sign up, ignore this email and nothing will happen.</p>`
	Text = "{{ data.greeting }}\n\nPlease confirm your subscription to {{ data.listName }} by opening this link:\n\n" +
		"{{ data.confirmUrl }}\n\nThe link works until {{ data.expiresAt }}. If you did not sign up, ignore this email and nothing will happen.\n"
)

// Stage stores confirmation emails and returns their send envelopes. Handle
// is safe for concurrent use.
type Stage struct {
	pg *pgxpool.Pool
}

var _ pipeline.Stage = (*Stage)(nil)

// New returns the stage over pg (the workspace's policy and domains, the
// message rows).
func New(pg *pgxpool.Pool) *Stage { return &Stage{pg: pg} }

// Sender is what a workspace's confirmation emails go out with.
type Sender struct {
	From   schemas.Address
	Policy schemas.PolicyRef
}

// Handle stores the confirmation email of one contact.optin_requested.v1
// envelope as a queued transactional message and returns its
// transactional.send.v1 envelope; other types, and requests of a workspace
// that is gone, return nothing. A malformed payload is permanent (dead
// letter); a Postgres error is retried by the runner.
func (s *Stage) Handle(ctx context.Context, env schemas.Envelope) ([]schemas.Envelope, error) {
	if env.Type != schemas.TypeOptInRequested {
		return nil, nil
	}
	var p schemas.OptInRequestedPayload
	if err := json.Unmarshal(env.Payload, &p); err != nil || p.Email == "" || p.ConfirmURL == "" {
		return nil, pipeline.Permanent(fmt.Errorf("optin %s: bad payload: %v", env.ID, err))
	}
	snd, ok, err := s.sender(ctx, env.Workspace)
	if err != nil {
		return nil, fmt.Errorf("optin %s: %w", env.ID, err)
	}
	if !ok {
		return nil, nil
	}
	sp, out, err := Message(env, p, snd)
	if err != nil {
		return nil, pipeline.Permanent(fmt.Errorf("optin %s: %w", env.ID, err))
	}
	_, err = s.pg.Exec(ctx, sqlStore, out.ID, env.Workspace, sp.To, p.ContactID, sp.RFCMessageID,
		sp.Policy.ID, sp.Policy.Provider, sp.AcceptedAt)
	if err != nil {
		return nil, fmt.Errorf("optin %s: store message: %w", env.ID, err)
	}
	return []schemas.Envelope{out}, nil
}

// sender reads the workspace's default Transactional policy and domains
// (sender.sql); ok is false when the workspace is gone.
func (s *Stage) sender(ctx context.Context, ws string) (Sender, bool, error) {
	var id, kind, provider *string
	var fromEmail, fromName string
	var domains []string
	err := s.pg.QueryRow(ctx, sqlSender, ws).Scan(&id, &kind, &fromEmail, &fromName, &provider, &domains)
	if errors.Is(err, pgx.ErrNoRows) {
		return Sender{}, false, nil
	}
	if err != nil {
		return Sender{}, false, fmt.Errorf("read default send policy: %w", err)
	}
	// The built-in default policy of a workspace that stores none (as
	// ingest/transactional.BuiltinPolicy).
	pol := schemas.PolicyRef{ID: schemas.IDFromKey(ws, "send-policy", "transactional"), Key: "transactional",
		Kind: schemas.PolicyTransactional, Provider: "smtp"}
	if id != nil {
		pol.ID, pol.Kind, pol.Provider = *id, deref(kind), deref(provider)
	}
	return Sender{From: schemas.Address{Email: email.DefaultSender(fromEmail, domains, ""), Name: fromName}, Policy: pol}, true, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Message returns the send payload and transactional.send.v1 envelope of
// the confirmation email asked for by env (payload p) from snd: its id
// derived from env.ID,
// keyed by workspace and message as a send's, the sources above with the
// greeting, list name, link and expiry as data, the contact as recipient.
func Message(env schemas.Envelope, p schemas.OptInRequestedPayload, snd Sender) (schemas.SendPayload, schemas.Envelope, error) {
	id := schemas.ChildID(env.ID, schemas.TypeTransactionalSend, 0)
	at := env.OccurredAt.UTC()
	if at.IsZero() {
		at = time.Now().UTC()
	}
	greeting := "Hello,"
	if p.FirstName != "" {
		greeting = "Hello " + p.FirstName + ","
	}
	data, err := json.Marshal(map[string]string{"greeting": greeting, "listName": p.ListName, "confirmUrl": p.ConfirmURL,
		"expiresAt": p.ExpiresAt.UTC().Format("2 January 2006 15:04 MST")})
	if err != nil {
		return schemas.SendPayload{}, schemas.Envelope{}, fmt.Errorf("encode data: %w", err)
	}
	domain := snd.From.Email[strings.LastIndexByte(snd.From.Email, '@')+1:]
	pl := schemas.SendPayload{
		MessageID: id, RFCMessageID: email.FormatMessageID(id, domain), From: snd.From, To: p.Email, Policy: snd.Policy,
		Subject: Subject, HTML: HTML, Text: Text, Data: data, AcceptedAt: at,
		Contact: &schemas.RecipientContact{ID: p.ContactID, Email: p.Email, FirstName: p.FirstName},
	}
	b, err := schemas.AppendSendPayload(nil, &pl)
	if err != nil {
		return pl, schemas.Envelope{}, err
	}
	return pl, schemas.Envelope{ID: id, Workspace: env.Workspace, Type: schemas.TypeTransactionalSend, Key: env.Workspace + ":" + id,
		OccurredAt: at, CausationID: env.ID, Traceparent: env.Traceparent, Payload: b, PayloadCompact: true}, nil
}
