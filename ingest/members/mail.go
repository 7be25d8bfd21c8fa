package members

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/ingest"
	"sendstream/schemas"
	"sendstream/sinks/email"
)

// Invitation emails. There is one mail path: an invitation's email is a
// transactional message of its workspace, stored queued in
// transactional_messages (the message log lists it) with its
// transactional.send.v1 envelope written to the contacts outbox, both in
// the invitation's transaction; the request publishes the envelope before
// answering and the outbox relay publishes it if the request died first.
// The delivery stage renders, builds, DKIM-signs and hands it to the
// provider of the workspace's default Transactional policy, as it does a
// double opt-in confirmation (stages/optin builds those the same way).

var (
	//go:embed sql/invite_context.sql
	sqlInviteContext string
	//go:embed sql/store_invite_message.sql
	sqlStoreInviteMessage string
)

// The invitation email as Liquid sources, rendered by the delivery stage
// with the data storeInviteMail sets: values are never part of a source,
// and every {{ … }} of the HTML part is HTML-escaped there.
const (
	InviteSubject = "{{ data.inviter }} invited you to {{ data.workspaceName }} on Sendstream"
	InviteHTML    = `<p>{{ data.inviter }} invited you to join the workspace <b>{{ data.workspaceName }}</b> on Sendstream as {{ data.role }}.</p>` +
		`<p><a href="{{ data.acceptUrl }}">Accept the invitation</a></p>` +
		`<p>Or open this link: {{ data.acceptUrl }}</p>` +
		`<p>The link works once, until {{ data.expiresAt }}. If you did not expect this invitation, ignore this email.</p>`
	InviteText = "{{ data.inviter }} invited you to join the workspace {{ data.workspaceName }} on Sendstream as {{ data.role }}.\n\n" +
		"Accept the invitation by opening this link:\n\n{{ data.acceptUrl }}\n\n" +
		"The link works once, until {{ data.expiresAt }}. If you did not expect this invitation, ignore this email.\n"
)

// Outbox writes a change and its announcements in one transaction and is
// told when they were published: contacts.Store is the one outbox (its
// relay publishes what a request left behind).
type Outbox interface {
	InOutbox(ctx context.Context, write func(pgx.Tx) error, announce func() []ingest.Message) ([]ingest.Message, []int64, error)
	Published(ids ...int64)
}

type outboxRef struct{ o Outbox }

// SetOutbox makes Invite send invitation emails through o (the serving
// process's contacts store, whose outbox scope is its topic prefix). A
// Store without one (the admin CLI) creates invitations without email.
// Safe to call while serving.
func (s *Store) SetOutbox(o Outbox) {
	if o == nil {
		s.outbox.Store(nil)
		return
	}
	s.outbox.Store(&outboxRef{o: o})
}

// inviteContext is what invite_context.sql reads in the invitation's
// transaction.
type inviteContext struct {
	workspaceName string
	member        bool // the email is already a member
	suppressed    bool // bounced, complained or erased
	from          schemas.Address
	policy        schemas.PolicyRef
	usableSender  bool // a default policy with a sender, or a sending domain
}

// readInviteContext reads the workspace's name and sender and the
// invitee's standing; a gone workspace is ErrInvalid.
func readInviteContext(ctx context.Context, tx pgx.Tx, ws, addr string) (inviteContext, error) {
	var ic inviteContext
	var id, kind, provider *string
	var fromEmail, fromName string
	var domains []string
	err := tx.QueryRow(ctx, sqlInviteContext, ws, addr).Scan(&ic.workspaceName, &ic.member, &ic.suppressed,
		&id, &kind, &fromEmail, &fromName, &provider, &domains)
	if errors.Is(err, pgx.ErrNoRows) {
		return ic, fmt.Errorf("%w: the workspace is gone", ErrInvalid)
	}
	if err != nil {
		return ic, fmt.Errorf("read workspace and sender: %w", err)
	}
	// The built-in default policy of a workspace that stores none (as
	// ingest/transactional.BuiltinPolicy).
	ic.policy = schemas.PolicyRef{ID: schemas.IDFromKey(ws, "send-policy", "transactional"), Key: "transactional",
		Kind: schemas.PolicyTransactional, Provider: "smtp"}
	if id != nil {
		ic.policy.ID, ic.policy.Kind, ic.policy.Provider = *id, deref(kind), deref(provider)
	}
	ic.usableSender = fromEmail != "" || len(domains) > 0
	ic.from = schemas.Address{Email: email.DefaultSender(fromEmail, domains, ""), Name: fromName}
	return ic, nil
}

// unusable says why the invitation cannot be emailed ("" when it can).
func (ic inviteContext) unusable() string {
	switch {
	case ic.suppressed:
		return "this address is on the workspace's suppression list (it bounced, complained or was erased)"
	case !ic.usableSender:
		return "the workspace has no sending domain and its default send policy names no sender address " +
			"(add one with `admin domain add`)"
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// storeInviteMail stores inv's email as a queued transactional message in
// tx and returns its transactional.send.v1 envelope: its id derived from
// the invitation's, from ic's sender under ic's policy, the sources above
// with the inviter, workspace, role, link and expiry as data.
func storeInviteMail(ctx context.Context, tx pgx.Tx, by Member, inv Invitation, ic inviteContext, now time.Time) (ingest.Message, error) {
	id := schemas.ChildID(inv.ID, schemas.TypeTransactionalSend, 0)
	at := now.UTC()
	inviter := by.Email
	if inviter == "" {
		inviter = "A member"
	}
	data, err := json.Marshal(map[string]string{"inviter": inviter, "workspaceName": ic.workspaceName, "role": inv.Role,
		"acceptUrl": inv.AcceptURL, "expiresAt": inv.ExpiresAt.UTC().Format("2 January 2006 15:04 MST")})
	if err != nil {
		return ingest.Message{}, fmt.Errorf("encode invitation data: %w", err)
	}
	domain := ic.from.Email[strings.LastIndexByte(ic.from.Email, '@')+1:]
	pl := schemas.SendPayload{
		MessageID: id, RFCMessageID: email.FormatMessageID(id, domain), WorkspaceName: ic.workspaceName,
		From: ic.from, To: inv.Email, Policy: ic.policy,
		Subject: InviteSubject, HTML: InviteHTML, Text: InviteText, Data: data, AcceptedAt: at,
	}
	b, err := schemas.AppendSendPayload(nil, &pl)
	if err != nil {
		return ingest.Message{}, fmt.Errorf("encode invitation email: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlStoreInviteMessage, id, by.Workspace, inv.Email, pl.RFCMessageID,
		pl.Policy.ID, pl.Policy.Provider, at); err != nil {
		return ingest.Message{}, fmt.Errorf("store invitation email: %w", err)
	}
	env := schemas.Envelope{ID: id, Workspace: by.Workspace, Type: schemas.TypeTransactionalSend, Key: by.Workspace + ":" + id,
		OccurredAt: at, CausationID: inv.ID, Payload: b, PayloadCompact: true}
	return ingest.Message{Topic: schemas.TopicTransactional, Env: env}, nil
}
