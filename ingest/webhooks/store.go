package webhooks

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
)

var (
	//go:embed sql/lock.sql
	sqlLock string
	//go:embed sql/find.sql
	sqlFind string
	//go:embed sql/insert.sql
	sqlInsert string
	//go:embed sql/delete.sql
	sqlDelete string
	//go:embed sql/matching.sql
	sqlMatching string
)

// ErrNotFound: no such subscription in the workspace.
var ErrNotFound = errors.New("webhook subscription not found")

// Subscription is one REST hook (spec 2.5).
type Subscription struct {
	ID        string    `json:"id"`
	Event     string    `json:"event"`
	TargetURL string    `json:"targetUrl"`
	CreatedAt time.Time `json:"createdAt"`
}

// Store keeps REST hook subscriptions in Postgres (table
// webhook_subscriptions, migration 0050). Safe for concurrent use.
type Store struct {
	pg *pgxpool.Pool
}

// NewStore returns a Store on pg. A workspace may have any number of
// subscriptions: the spec sets no cap (its rate limit of 60 subscribes a
// minute bounds how fast they grow).
func NewStore(pg *pgxpool.Pool) *Store {
	return &Store{pg: pg}
}

// Subscribe creates the subscription of workspace ws to event at
// targetURL, or finds the one that exists (created reports which).
// Concurrent calls for one workspace are serialised, so two equal calls
// create one.
func (s *Store) Subscribe(ctx context.Context, ws, event, targetURL string) (sub Subscription, created bool, err error) {
	sub = Subscription{Event: event, TargetURL: targetURL}
	err = pgx.BeginFunc(ctx, s.pg, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLock, ws); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		err := tx.QueryRow(ctx, sqlFind, ws, event, targetURL).Scan(&sub.ID, &sub.CreatedAt)
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("find: %w", err)
		}
		sub.ID = schemas.NewID()
		if err := tx.QueryRow(ctx, sqlInsert, sub.ID, ws, event, targetURL).Scan(&sub.CreatedAt); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		created = true
		return nil
	})
	if err != nil {
		return Subscription{}, false, fmt.Errorf("subscribe %s to %s: %w", ws, event, err)
	}
	sub.CreatedAt = sub.CreatedAt.UTC()
	return sub, created, nil
}

// Delete removes subscription id of workspace ws and returns it;
// ErrNotFound when ws has no such subscription (never found, already
// deleted, or another workspace's).
func (s *Store) Delete(ctx context.Context, ws, id string) (Subscription, error) {
	sub := Subscription{ID: id}
	err := s.pg.QueryRow(ctx, sqlDelete, ws, id).Scan(&sub.Event, &sub.TargetURL, &sub.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Subscription{}, ErrNotFound
	}
	if err != nil {
		return Subscription{}, fmt.Errorf("delete webhook subscription %s: %w", id, err)
	}
	sub.CreatedAt = sub.CreatedAt.UTC()
	return sub, nil
}

// Matching returns the subscriptions of workspace ws to event, by id. The
// fan-out calls it for each domain event.
func (s *Store) Matching(ctx context.Context, ws, event string) ([]Subscription, error) {
	rows, err := s.pg.Query(ctx, sqlMatching, ws, event)
	if err != nil {
		return nil, fmt.Errorf("webhook subscriptions of %s to %s: %w", ws, event, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Subscription, error) {
		sub := Subscription{Event: event}
		err := r.Scan(&sub.ID, &sub.TargetURL, &sub.CreatedAt)
		sub.CreatedAt = sub.CreatedAt.UTC()
		return sub, err
	})
	if err != nil {
		return nil, fmt.Errorf("webhook subscriptions of %s to %s: %w", ws, event, err)
	}
	return out, nil
}
