package members

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"sendstream/ingest"
)

var (
	//go:embed sql/member_role.sql
	sqlMemberRole string
	//go:embed sql/other_owners.sql
	sqlOtherOwners string
	//go:embed sql/delete_member.sql
	sqlDeleteMember string
)

// ErrNotFound: no such member in the workspace.
var ErrNotFound = errors.New("member not found")

// RemoveMember deletes member id of by's workspace, with the member's
// sessions and OAuth connections: every access token the member approved
// (or that acts as the member) stops working on every process at once,
// announced by the connections' delete trigger in the same transaction
// (ingest/auth Channel). by needs PermMembers; only an owner may remove an
// owner, and never the workspace's last one (ErrInvalid). Errors:
// ErrForbidden, ErrInvalid, ErrNotFound, or a wrapped Postgres error.
func (s *Store) RemoveMember(ctx context.Context, by Member, id string) error {
	if !Can(by, PermMembers) {
		return fmt.Errorf("%w: removing members needs the %s permission", ErrForbidden, PermMembers)
	}
	err := pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		var role string
		if err := tx.QueryRow(ctx, sqlMemberRole, by.Workspace, id).Scan(&role); errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		} else if err != nil {
			return err
		}
		if role == RoleOwner {
			if by.Role != RoleOwner {
				return fmt.Errorf("%w: only an owner may remove an owner", ErrForbidden)
			}
			var others int
			if err := tx.QueryRow(ctx, sqlOtherOwners, by.Workspace, id).Scan(&others); err != nil {
				return err
			}
			if others == 0 {
				return fmt.Errorf("%w: the workspace's last owner cannot be removed", ErrInvalid)
			}
		}
		_, err := tx.Exec(ctx, sqlDeleteMember, by.Workspace, id)
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrForbidden) && !errors.Is(err, ErrInvalid) {
		return fmt.Errorf("remove member %s: %w", id, err)
	}
	return err
}

// removeMember is DELETE /api/members/{id} (session only).
func (s *Store) removeMember(c *ingest.Call) ingest.Result {
	m := FromPrincipal(c.Principal)
	if m.Role == RoleSupport {
		return ingest.Fail(403, "forbidden", "Support staff have read-only access")
	}
	err := s.RemoveMember(c.Ctx, m, c.Params["id"])
	switch {
	case err == nil:
		return ingest.OK(200, map[string]any{"id": c.Params["id"], "deleted": true})
	case errors.Is(err, ErrNotFound):
		return ingest.Fail(404, "not_found", "No such member in this workspace")
	case errors.Is(err, ErrForbidden):
		return ingest.Fail(403, "forbidden", err.Error())
	case errors.Is(err, ErrInvalid):
		return ingest.Fail(400, "invalid_request", err.Error())
	}
	return ingest.Fail(503, "unavailable", "Removing the member failed; nothing was done, retry later")
}
