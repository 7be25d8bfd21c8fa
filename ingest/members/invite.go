package members

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"sendstream/ingest"
	"sendstream/schemas"
)

var (
	//go:embed sql/create_invitation.sql
	sqlCreateInvitation string
	//go:embed sql/replace_invitations.sql
	sqlReplaceInvitations string
	//go:embed sql/revoke_invitation.sql
	sqlRevokeInvitation string
)

// Invitation is an invitation just created; Token is shown once. When the
// workspace can send it, its email (Emailed, MessageID) was stored in the
// invitation's transaction and goes out through the transactional path;
// otherwise NotEmailed says why no email was sent.
type Invitation struct {
	ID        string    `json:"id"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	Token     string    `json:"token"`
	AcceptURL string    `json:"acceptUrl"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Emailed says the invitee is sent the link by email (a queued
	// transactional message, MessageID, listed in the message log).
	Emailed   bool   `json:"emailed"`
	MessageID string `json:"messageId,omitempty"`
	// NotEmailed says why no email was sent ("" when Emailed).
	NotEmailed string `json:"notEmailedReason,omitempty"`

	mail      []ingest.Message // the email's send envelope, to publish
	outboxIDs []int64          // its contact_outbox rows
	outbox    Outbox
}

// Announce returns res (the answer of the call that created inv) with the
// invitation email's envelope to publish before answering. The envelope
// was written to the outbox with the invitation, so if publishing fails
// the relay sends it later (Outboxed); once published, its outbox row is
// deleted.
func (inv Invitation) Announce(res ingest.Result) ingest.Result {
	if len(inv.mail) == 0 {
		return res
	}
	res.Publish = append(res.Publish, inv.mail...)
	res.Stored, res.Outboxed = true, true
	ids, o := inv.outboxIDs, inv.outbox
	res.Published = func() { o.Published(ids...) }
	return res
}

// Invite creates an invitation to by's workspace and, in the same
// transaction, its email to the invitee (see SetOutbox and mail.go). by
// needs PermMembers, and only an owner may invite an owner. An email that
// is already a member of the workspace is refused (ErrInvalid); inviting
// an email with a pending invitation replaces it (the old link stops
// working, the new one is sent), as Linear and Slack resend an
// invitation.
func (s *Store) Invite(ctx context.Context, by Member, email, role string, perms []string, now time.Time) (Invitation, error) {
	if !Can(by, PermMembers) {
		return Invitation{}, fmt.Errorf("%w: inviting members needs the %s permission", ErrForbidden, PermMembers)
	}
	if role == RoleOwner && by.Role != RoleOwner {
		return Invitation{}, fmt.Errorf("%w: only an owner may invite an owner", ErrForbidden)
	}
	norm, err := schemas.NormalizeEmail(email)
	if err != nil {
		return Invitation{}, fmt.Errorf("%w: email %q %v", ErrInvalid, email, err)
	}
	if err := CheckRole(role, perms); err != nil {
		return Invitation{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if perms == nil {
		perms = []string{}
	}
	tok, hash, err := newSecret()
	if err != nil {
		return Invitation{}, err
	}
	inv := Invitation{ID: schemas.NewID(), Email: norm, Role: role, Token: tok,
		AcceptURL: s.cfg.SiteURL + "/invitation?token=" + tok, ExpiresAt: now.Add(s.cfg.InvitationTTL).UTC()}
	var mail []ingest.Message
	write := func(tx pgx.Tx) error {
		inv.Emailed, inv.MessageID, inv.NotEmailed, mail = false, "", "", nil
		ic, err := readInviteContext(ctx, tx, by.Workspace, norm)
		if err != nil {
			return err
		}
		if ic.member {
			return fmt.Errorf("%w: %s is already a member of this workspace", ErrInvalid, norm)
		}
		if _, err := tx.Exec(ctx, sqlReplaceInvitations, by.Workspace, norm); err != nil {
			return fmt.Errorf("replace pending invitations: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlCreateInvitation, inv.ID, by.Workspace, norm, role, perms, hash[:], by.ID, inv.ExpiresAt); err != nil {
			return fmt.Errorf("create invitation: %w", err)
		}
		if s.outbox.Load() == nil {
			inv.NotEmailed = "invitation emails are not configured on this server"
			return nil
		}
		if inv.NotEmailed = ic.unusable(); inv.NotEmailed != "" {
			return nil
		}
		msg, err := storeInviteMail(ctx, tx, by, inv, ic, now)
		if err != nil {
			return err
		}
		inv.Emailed, inv.MessageID, mail = true, msg.Env.ID, []ingest.Message{msg}
		return nil
	}
	if ob := s.outbox.Load(); ob != nil {
		var msgs []ingest.Message
		msgs, inv.outboxIDs, err = ob.o.InOutbox(ctx, write, func() []ingest.Message { return mail })
		inv.mail, inv.outbox = msgs, ob.o
	} else {
		err = pgx.BeginFunc(ctx, s.pg, write)
	}
	if err != nil {
		if errors.Is(err, ErrInvalid) {
			return Invitation{}, err
		}
		return Invitation{}, fmt.Errorf("invite %s to workspace %s: %w", norm, by.Workspace, err)
	}
	return inv, nil
}

// ErrNoInvitation: no pending invitation of that id in the workspace.
var ErrNoInvitation = errors.New("invitation not found")

// RevokeInvitation deletes pending invitation id of by's workspace: its
// link stops working (GET and POST /invitation answer 400). by needs
// PermMembers, and only an owner may revoke an invitation to the owner
// role. Errors: ErrForbidden, ErrNoInvitation (unknown, accepted or of
// another workspace), or a wrapped Postgres error.
func (s *Store) RevokeInvitation(ctx context.Context, by Member, id string) error {
	if !Can(by, PermMembers) {
		return fmt.Errorf("%w: revoking invitations needs the %s permission", ErrForbidden, PermMembers)
	}
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		var role string
		if err := tx.QueryRow(ctx, sqlRevokeInvitation, by.Workspace, id).Scan(&role); errors.Is(err, pgx.ErrNoRows) {
			return ErrNoInvitation
		} else if err != nil {
			return err
		}
		if role == RoleOwner && by.Role != RoleOwner {
			return fmt.Errorf("%w: only an owner may revoke an invitation to the owner role", ErrForbidden)
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNoInvitation) && !errors.Is(err, ErrForbidden) {
		return fmt.Errorf("revoke invitation %s: %w", id, err)
	}
	return err
}

// revokeInvitation is DELETE /api/invitations/{id} (session only).
func (s *Store) revokeInvitation(c *ingest.Call) ingest.Result {
	m := FromPrincipal(c.Principal)
	if m.Role == RoleSupport {
		return ingest.Fail(403, "forbidden", "Support staff have read-only access")
	}
	err := s.RevokeInvitation(c.Ctx, m, c.Params["id"])
	switch {
	case err == nil:
		return ingest.OK(200, map[string]any{"id": c.Params["id"], "revoked": true})
	case errors.Is(err, ErrNoInvitation):
		return ingest.Fail(404, "not_found", "No pending invitation of this id in this workspace")
	case errors.Is(err, ErrForbidden):
		return ingest.Fail(403, "forbidden", err.Error())
	}
	return ingest.Fail(503, "unavailable", "Revoking the invitation failed; nothing was done, retry later")
}
