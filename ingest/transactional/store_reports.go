package transactional

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file applies what comes back after a send: unsubscribes and
// provider reports.

// UnsubscribeResult is what an unsubscribe did.
type UnsubscribeResult struct {
	// WorkspaceName is the workspace's name; "" with Found false when the
	// workspace does not exist.
	WorkspaceName string
	Found         bool
	// ContactID is the contact this call moved to UNSUBSCRIBED, at At; ""
	// when there is none, or it was already UNSUBSCRIBED, BOUNCED or
	// COMPLAINED (nothing changed, nothing to announce).
	ContactID string
	At        time.Time
}

// Unsubscribe suppresses email for marketing in ws and marks its contact
// UNSUBSCRIBED, in a statement of its own.
func (s *Store) Unsubscribe(ctx context.Context, ws, email, messageID string) (UnsubscribeResult, error) {
	return unsubscribe(ctx, s.pool, ws, email, messageID)
}

// UnsubscribeTx is Unsubscribe within tx, so the contact.unsubscribed.v1
// envelope can be written to an outbox in the same transaction
// (contacts.Store.InOutbox).
func (s *Store) UnsubscribeTx(ctx context.Context, tx pgx.Tx, ws, email, messageID string) (UnsubscribeResult, error) {
	return unsubscribe(ctx, tx, ws, email, messageID)
}

func unsubscribe(ctx context.Context, q rowQuerier, ws, email, messageID string) (UnsubscribeResult, error) {
	var name, contactID *string
	var at *time.Time
	if err := q.QueryRow(ctx, sqlUnsubscribe, ws, email, messageID).Scan(&name, &contactID, &at); err != nil {
		return UnsubscribeResult{}, fmt.Errorf("unsubscribe: %w", err)
	}
	if name == nil {
		return UnsubscribeResult{}, nil
	}
	r := UnsubscribeResult{WorkspaceName: *name, Found: true}
	if contactID != nil && at != nil {
		r.ContactID, r.At = *contactID, at.UTC()
	}
	return r, nil
}

// WorkspaceName returns a workspace's name; found false when it is gone.
func (s *Store) WorkspaceName(ctx context.Context, ws string) (string, bool, error) {
	var name string
	err := s.pool.QueryRow(ctx, sqlWorkspaceName, ws).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read workspace: %w", err)
	}
	return name, true, nil
}

// Report is one provider report to apply.
type Report struct {
	Ref           string // service message id or Message-ID
	Workspace     string // "" when the report is not tied to a workspace (SES)
	Status        string // delivered, bounced or complained
	At            time.Time
	BounceType    string // hard or soft
	Reason        string
	ComplaintType string
	Email         string // the reported address
}

// ReportResult is what applying a report did.
type ReportResult struct {
	Found      bool
	Moved      bool   // the status changed
	Previous   string // the status before
	MessageID  string
	Workspace  string
	To         string
	RFCID      string
	ExternalID string
	TemplateID string
	PolicyID   string
	Provider   string
}

// ApplyReport moves a message per a provider report and suppresses the
// address on a hard bounce or complaint (see sql/report.sql), in a
// statement of its own.
func (s *Store) ApplyReport(ctx context.Context, r Report) (ReportResult, error) {
	return applyReport(ctx, s.pool, r)
}

// ApplyReportTx is ApplyReport within tx, so the envelopes announcing the
// move can be written to an outbox in the same transaction
// (contacts.Store.InOutbox).
func (s *Store) ApplyReportTx(ctx context.Context, tx pgx.Tx, r Report) (ReportResult, error) {
	return applyReport(ctx, tx, r)
}

// rowQuerier is what applyReport runs on: a pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func applyReport(ctx context.Context, q rowQuerier, r Report) (ReportResult, error) {
	var out ReportResult
	err := q.QueryRow(ctx, sqlReport, r.Ref, r.Workspace, r.Status, r.At, r.BounceType, r.Reason, r.ComplaintType, r.Email).
		Scan(&out.MessageID, &out.Workspace, &out.To, &out.RFCID, &out.ExternalID, &out.TemplateID, &out.PolicyID,
			&out.Provider, &out.Previous, &out.Moved)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("apply report: %w", err)
	}
	out.Found = true
	return out, nil
}
