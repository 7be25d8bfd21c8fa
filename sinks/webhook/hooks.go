package webhook

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
)

var (
	//go:embed sql/subscriptions_matching.sql
	sqlSubscriptionsMatching string
	//go:embed sql/subscription_get.sql
	sqlSubscriptionGet string
	//go:embed sql/subscription_delete.sql
	sqlSubscriptionDelete string
)

// Hook is one place a workspace's events are delivered to: a REST hook
// subscription or a dashboard endpoint.
type Hook struct {
	Kind string // schemas.WebhookTargetSubscription or schemas.WebhookTargetEndpoint
	ID   string
	URL  string
	// Secrets sign the delivery (current first); none: unsigned.
	Secrets []string
	// Failing: an endpoint whose run of failures is open (failing_since
	// set), so a success must end it (ClearFailing). Always false for REST
	// hooks, which are never disabled.
	Failing bool
}

// RESTHooks reads and retires REST hook subscriptions (table
// webhook_subscriptions, spec 2.5) for the delivery stages. They carry no
// secret. Safe for concurrent use.
type RESTHooks struct {
	pg *pgxpool.Pool
}

// NewRESTHooks returns RESTHooks on pg.
func NewRESTHooks(pg *pgxpool.Pool) *RESTHooks { return &RESTHooks{pg: pg} }

// Kind returns schemas.WebhookTargetSubscription.
func (r *RESTHooks) Kind() string { return schemas.WebhookTargetSubscription }

// Matching returns the subscriptions of workspace ws to event, by id.
func (r *RESTHooks) Matching(ctx context.Context, ws, event string) ([]Hook, error) {
	rows, err := r.pg.Query(ctx, sqlSubscriptionsMatching, ws, event)
	if err != nil {
		return nil, fmt.Errorf("REST hooks of %s to %s: %w", ws, event, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Hook, error) {
		h := Hook{Kind: schemas.WebhookTargetSubscription}
		return h, row.Scan(&h.ID, &h.URL)
	})
	if err != nil {
		return nil, fmt.Errorf("REST hooks of %s to %s: %w", ws, event, err)
	}
	return out, nil
}

// Lookup returns subscription id of workspace ws; ok is false when it no
// longer exists (deleted, or retired by a 410).
func (r *RESTHooks) Lookup(ctx context.Context, ws, id string) (h Hook, ok bool, err error) {
	h = Hook{Kind: schemas.WebhookTargetSubscription, ID: id}
	err = r.pg.QueryRow(ctx, sqlSubscriptionGet, ws, id).Scan(&h.URL)
	if errors.Is(err, pgx.ErrNoRows) {
		return Hook{}, false, nil
	}
	if err != nil {
		return Hook{}, false, fmt.Errorf("REST hook %s: %w", id, err)
	}
	return h, true, nil
}

// Retire deletes subscription id of workspace ws: its receiver answered
// 410 Gone (spec 6). Deleting one already gone is no error.
func (r *RESTHooks) Retire(ctx context.Context, ws, id string) error {
	if _, err := r.pg.Exec(ctx, sqlSubscriptionDelete, ws, id); err != nil {
		return fmt.Errorf("delete REST hook %s: %w", id, err)
	}
	return nil
}
