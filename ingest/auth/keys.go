package auth

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed sql/list_api_keys.sql
var sqlListAPIKeys string

// APIKey describes a stored API key for a list: never the key itself,
// only its hint (prefix and last four characters).
type APIKey struct {
	ID        string
	Name      string
	Hint      string
	Scopes    []string   // empty means full access
	ExpiresAt *time.Time // nil: never expires
	CreatedAt time.Time
}

// ListAPIKeys returns the workspace's API keys, newest first.
func (s *Store) ListAPIKeys(ctx context.Context, workspaceID string) ([]APIKey, error) {
	rows, err := s.pg.Query(ctx, sqlListAPIKeys, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list api keys of workspace %s: %w", workspaceID, err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (APIKey, error) {
		var k APIKey
		err := r.Scan(&k.ID, &k.Name, &k.Hint, &k.Scopes, &k.ExpiresAt, &k.CreatedAt)
		return k, err
	})
	if err != nil {
		return nil, fmt.Errorf("list api keys of workspace %s: %w", workspaceID, err)
	}
	return keys, nil
}
