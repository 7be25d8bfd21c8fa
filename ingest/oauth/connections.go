package oauth

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed sql/list_connections.sql
var sqlListConnections string

// Connection is one live grant to an app of the workspace: a member's
// consent (authorization_code and its refresh chain) or a client_credentials
// issuance (MemberID ""). Disconnect revokes every connection of its app.
type Connection struct {
	ID          string     `json:"id"`
	AppID       string     `json:"appId"`
	AppName     string     `json:"appName"`
	MemberID    string     `json:"memberId,omitempty"`
	MemberEmail string     `json:"memberEmail,omitempty"`
	Grant       string     `json:"grantType"`
	Scopes      []string   `json:"scopes"`
	CreatedAt   time.Time  `json:"createdAt"`
	LastTokenAt *time.Time `json:"lastTokenAt,omitempty"` // the newest token issued on it
}

// Connections lists the workspace's live connections, newest first (the
// dashboard's connected-apps page).
func (s *Store) Connections(ctx context.Context, workspace string) ([]Connection, error) {
	rows, err := s.pg.Query(ctx, sqlListConnections, workspace)
	if err != nil {
		return nil, fmt.Errorf("list oauth connections of %s: %w", workspace, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Connection, error) {
		var c Connection
		err := r.Scan(&c.ID, &c.AppID, &c.AppName, &c.MemberID, &c.MemberEmail, &c.Grant, &c.Scopes, &c.CreatedAt, &c.LastTokenAt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("list oauth connections of %s: %w", workspace, err)
	}
	return out, nil
}
