package auth

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/list_tracking_tokens.sql
	sqlListTrackingTokens string
	//go:embed sql/delete_tracking_token.sql
	sqlDeleteTrackingToken string
)

// TrackingToken describes a stored tracking token for a list: never the
// token itself, only its hint (prefix and last four characters).
type TrackingToken struct {
	ID        string
	Hint      string
	Domains   []string // allowed origins' hosts; empty allows every origin
	CreatedAt time.Time
}

// ListTrackingTokens returns the workspace's tracking tokens, newest first.
func (s *Store) ListTrackingTokens(ctx context.Context, workspaceID string) ([]TrackingToken, error) {
	rows, err := s.pg.Query(ctx, sqlListTrackingTokens, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list tracking tokens of workspace %s: %w", workspaceID, err)
	}
	toks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TrackingToken, error) {
		var t TrackingToken
		err := r.Scan(&t.ID, &t.Hint, &t.Domains, &t.CreatedAt)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("list tracking tokens of workspace %s: %w", workspaceID, err)
	}
	return toks, nil
}

// DeleteTrackingToken deletes a tracking token. The deletion's NOTIFY
// (migration 0075) evicts it from every process's credential cache as it
// commits, so the next call with it is refused; the key-cache TTL bounds
// it when a notification is lost. ErrNotFound when the workspace has no
// such token.
func (s *Store) DeleteTrackingToken(ctx context.Context, workspaceID, tokenID string) error {
	tag, err := s.pg.Exec(ctx, sqlDeleteTrackingToken, workspaceID, tokenID)
	if err != nil {
		return fmt.Errorf("delete tracking token %s: %w", tokenID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("tracking token %s in workspace %s: %w", tokenID, workspaceID, ErrNotFound)
	}
	return nil
}
