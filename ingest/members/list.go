package members

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/list_members.sql
	sqlListMembers string
	//go:embed sql/list_invitations.sql
	sqlListInvitations string
)

// Listed is one member of a workspace as the dashboard lists it.
type Listed struct {
	ID          string
	Email       string
	Role        string
	Permissions []string // named on the member (RoleMember, RoleCustom)
	JoinedAt    time.Time
}

// Pending is an invitation not yet accepted and not expired; its token
// is never readable again.
type Pending struct {
	ID          string
	Email       string
	Role        string
	Permissions []string
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// ListMembers returns workspace's members, oldest first. Reading needs no
// permission (every member and support staff see them); the caller
// checks the session.
func (s *Store) ListMembers(ctx context.Context, workspace string) ([]Listed, error) {
	rows, err := s.pg.Query(ctx, sqlListMembers, workspace)
	if err != nil {
		return nil, fmt.Errorf("list members of workspace %s: %w", workspace, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Listed, error) {
		var m Listed
		err := r.Scan(&m.ID, &m.Email, &m.Role, &m.Permissions, &m.JoinedAt)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("list members of workspace %s: %w", workspace, err)
	}
	return out, nil
}

// ListInvitations returns workspace's open invitations at now (neither
// accepted nor expired), newest first.
func (s *Store) ListInvitations(ctx context.Context, workspace string, now time.Time) ([]Pending, error) {
	rows, err := s.pg.Query(ctx, sqlListInvitations, workspace, now)
	if err != nil {
		return nil, fmt.Errorf("list invitations of workspace %s: %w", workspace, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Pending, error) {
		var p Pending
		err := r.Scan(&p.ID, &p.Email, &p.Role, &p.Permissions, &p.CreatedAt, &p.ExpiresAt)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list invitations of workspace %s: %w", workspace, err)
	}
	return out, nil
}
