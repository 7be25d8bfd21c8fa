package webhook

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/schemas"
)

var (
	//go:embed sql/endpoint_insert.sql
	sqlEndpointInsert string
	//go:embed sql/endpoint_list.sql
	sqlEndpointList string
	//go:embed sql/endpoint_for.sql
	sqlEndpointFor string
	//go:embed sql/endpoint_enable.sql
	sqlEndpointEnable string
	//go:embed sql/endpoint_disable.sql
	sqlEndpointDisable string
	//go:embed sql/endpoint_delete.sql
	sqlEndpointDelete string
	//go:embed sql/endpoint_rotate.sql
	sqlEndpointRotate string
	//go:embed sql/endpoint_secrets.sql
	sqlEndpointSecrets string
	//go:embed sql/endpoint_lookup.sql
	sqlEndpointLookup string
	//go:embed sql/endpoint_mark_failing.sql
	sqlEndpointMarkFailing string
	//go:embed sql/endpoint_clear_failing.sql
	sqlEndpointClearFailing string
)

// Reasons an endpoint is disabled (Endpoint.DisabledReason).
const (
	DisabledByOperator = "disabled by an operator"
	DisabledGone       = "the endpoint answered 410 Gone"
	DisabledFailing    = "failing for more than 12 hours"
)

// RotationOverlap is how long a replaced endpoint secret keeps signing
// beside the new one (issue 25: 24 hours).
const RotationOverlap = 24 * time.Hour

// ErrEndpointNotFound: the workspace has no such endpoint (never created,
// deleted, or another workspace's).
var ErrEndpointNotFound = errors.New("webhook endpoint not found")

// Endpoint is one dashboard webhook endpoint, without its secrets (those
// come only from EndpointStore.Secrets).
type Endpoint struct {
	ID     string   `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	// Enabled is false once an operator disabled it, a delivery got 410
	// Gone, or it failed for more than 12 hours; DisabledReason and
	// DisabledAt say which and when.
	Enabled        bool       `json:"enabled"`
	DisabledReason string     `json:"disabledReason,omitempty"`
	DisabledAt     *time.Time `json:"disabledAt,omitempty"`
	// FailingSince is the first failed attempt of the current run of
	// failures (MarkFailing); nil while deliveries succeed.
	FailingSince *time.Time `json:"failingSince,omitempty"`
	// PreviousSecretExpiresAt is set during a rotation: until then the
	// replaced secret signs beside the current one.
	PreviousSecretExpiresAt *time.Time `json:"previousSecretExpiresAt,omitempty"`
	CreatedAt               time.Time  `json:"createdAt"`
	UpdatedAt               time.Time  `json:"updatedAt"`
}

// EndpointStoreConfig configures an EndpointStore.
type EndpointStoreConfig struct {
	// Secret is the server secret (SENDSTREAM_SECRET, or the local one
	// serve generates); the key that encrypts endpoint secrets is derived
	// from it. Required. Every process that reads or writes endpoints must
	// use the same one.
	Secret string
	// Now is the clock of the times the store writes (default time.Now).
	Now func() time.Time
}

// EndpointStore keeps dashboard webhook endpoints in Postgres (table
// webhook_endpoints, migration 0052), their secrets encrypted with
// AES-256-GCM under a key derived from the server secret. The admin
// commands (ingest/webhooks) manage endpoints through it; the fan-out
// (EndpointsFor, or Matching as a Source) and the delivery stage (Lookup
// and Retire as Targets, Secrets, MarkFailing, ClearFailing, Disable) read
// and update them. Safe for concurrent use. No method logs a secret or
// puts one in an error.
type EndpointStore struct {
	pg   *pgxpool.Pool
	seal *sealer
	now  func() time.Time
}

// NewEndpointStore returns an EndpointStore on pg; it fails on an empty
// server secret.
func NewEndpointStore(pg *pgxpool.Pool, cfg EndpointStoreConfig) (*EndpointStore, error) {
	s, err := newSealer(cfg.Secret)
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &EndpointStore{pg: pg, seal: s, now: cfg.Now}, nil
}

// NewEndpoint is what Create needs. The caller has checked the URL's
// address with a Guard (CheckTarget) and generated or validated the secret
// (NewSecret, ValidateSecret).
type NewEndpoint struct {
	URL    string
	Events []string
	Secret string
}

// Create stores a new enabled endpoint of workspace ws. It checks what
// needs no network: an https:// URL (ParseTarget), at least one
// event, each in the catalogue (schemas.LookupWebhookEvent; duplicates are
// dropped), and a valid secret; a refusal is an error saying which.
func (s *EndpointStore) Create(ctx context.Context, ws string, in NewEndpoint) (Endpoint, error) {
	t, err := ParseTarget(in.URL, true)
	if err != nil {
		return Endpoint{}, err
	}
	events, err := CheckEvents(in.Events)
	if err != nil {
		return Endpoint{}, err
	}
	if err := ValidateSecret(in.Secret); err != nil {
		return Endpoint{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	e := Endpoint{ID: schemas.NewIDAt(now), URL: t.URL, Events: events, Enabled: true, CreatedAt: now, UpdatedAt: now}
	sealed, err := s.seal.seal(e.ID, in.Secret)
	if err != nil {
		return Endpoint{}, err
	}
	if _, err := s.pg.Exec(ctx, sqlEndpointInsert, e.ID, ws, e.URL, e.Events, sealed, now); err != nil {
		return Endpoint{}, fmt.Errorf("create webhook endpoint in %s: %w", ws, err)
	}
	return e, nil
}

// CheckEvents returns events without duplicates, in the given order, or an
// error naming the first one the catalogue lacks; an empty list is an
// error.
func CheckEvents(events []string) ([]string, error) {
	var out []string
	for _, ev := range events {
		if _, ok := schemas.LookupWebhookEvent(ev); !ok {
			return nil, fmt.Errorf("unknown event type %q; GET /api/v1/webhooks/events lists the subscribable ones", ev)
		}
		if !slices.Contains(out, ev) {
			out = append(out, ev)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("at least one event type is required")
	}
	return out, nil
}

// List returns the endpoints of workspace ws, oldest first.
func (s *EndpointStore) List(ctx context.Context, ws string) ([]Endpoint, error) {
	return s.query(ctx, "list webhook endpoints of "+ws, sqlEndpointList, ws)
}

// EndpointsFor returns the enabled endpoints of workspace ws that want
// event, oldest first. The fan-out calls it for each domain event.
func (s *EndpointStore) EndpointsFor(ctx context.Context, ws, event string) ([]Endpoint, error) {
	return s.query(ctx, "webhook endpoints of "+ws+" for "+event, sqlEndpointFor, ws, event)
}

// Enable enables endpoint id of ws again and forgets its disable reason
// and its run of failures; ErrEndpointNotFound when ws has no such
// endpoint.
func (s *EndpointStore) Enable(ctx context.Context, ws, id string) (Endpoint, error) {
	return s.one(ctx, "enable webhook endpoint "+id, sqlEndpointEnable, ws, id, s.now().UTC())
}

// Disable disables endpoint id of ws with reason (an operator's request,
// 410 Gone, failing for more than 12 hours): EndpointsFor no longer
// returns it. Disabling a disabled endpoint keeps its first reason.
// ErrEndpointNotFound when ws has no such endpoint.
func (s *EndpointStore) Disable(ctx context.Context, ws, id, reason string) (Endpoint, error) {
	return s.one(ctx, "disable webhook endpoint "+id, sqlEndpointDisable, ws, id, reason, s.now().UTC())
}

// Delete removes endpoint id of ws; ErrEndpointNotFound when ws has no
// such endpoint (also on a second delete).
func (s *EndpointStore) Delete(ctx context.Context, ws, id string) error {
	var got string
	err := s.pg.QueryRow(ctx, sqlEndpointDelete, ws, id).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrEndpointNotFound
	}
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, err)
	}
	return nil
}

// RotateSecret makes secret (generated or validated by the caller) the
// current secret of endpoint id of ws; the replaced one keeps signing
// beside it for RotationOverlap. Rotating again within that time replaces
// the previous secret, so at most two secrets sign at once.
// ErrEndpointNotFound when ws has no such endpoint.
func (s *EndpointStore) RotateSecret(ctx context.Context, ws, id, secret string) (Endpoint, error) {
	if err := ValidateSecret(secret); err != nil {
		return Endpoint{}, err
	}
	sealed, err := s.seal.seal(id, secret)
	if err != nil {
		return Endpoint{}, err
	}
	now := s.now().UTC()
	return s.one(ctx, "rotate secret of webhook endpoint "+id, sqlEndpointRotate, ws, id, sealed, now.Add(RotationOverlap), now)
}

// Secrets returns the secrets that sign a delivery to endpoint id of ws at
// time now: the current one first, then the previous one while its
// rotation overlap lasts (Sign puts one signature per secret in the
// webhook-signature header). ErrEndpointNotFound when ws has no such
// endpoint. The delivery stage calls it for each attempt.
func (s *EndpointStore) Secrets(ctx context.Context, ws, id string, now time.Time) ([]string, error) {
	var cur, prev []byte
	var until *time.Time
	err := s.pg.QueryRow(ctx, sqlEndpointSecrets, ws, id).Scan(&cur, &prev, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrEndpointNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("secrets of webhook endpoint %s: %w", id, err)
	}
	return s.open(id, cur, prev, until, now)
}

// open decrypts the current secret and, while until is after now, the
// previous one.
func (s *EndpointStore) open(id string, cur, prev []byte, until *time.Time, now time.Time) ([]string, error) {
	secret, err := s.seal.open(id, cur)
	if err != nil {
		return nil, err
	}
	out := []string{secret}
	if prev != nil && until != nil && now.Before(*until) {
		old, err := s.seal.open(id, prev)
		if err != nil {
			return nil, err
		}
		out = append(out, old)
	}
	return out, nil
}

// MarkFailing records a failed delivery to endpoint id of ws at time at
// and returns when the current run of failures began (at, or an earlier
// failure's time). The schedule disables the endpoint when that is more
// than 12 hours ago. ErrEndpointNotFound when ws has no such endpoint.
func (s *EndpointStore) MarkFailing(ctx context.Context, ws, id string, at time.Time) (time.Time, error) {
	var since time.Time
	err := s.pg.QueryRow(ctx, sqlEndpointMarkFailing, ws, id, at.UTC()).Scan(&since)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, ErrEndpointNotFound
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("mark webhook endpoint %s failing: %w", id, err)
	}
	return since.UTC(), nil
}

// ClearFailing ends the run of failures of endpoint id of ws (a delivery
// succeeded). An unknown endpoint or one not failing is not an error.
func (s *EndpointStore) ClearFailing(ctx context.Context, ws, id string) error {
	if _, err := s.pg.Exec(ctx, sqlEndpointClearFailing, ws, id); err != nil {
		return fmt.Errorf("clear failing of webhook endpoint %s: %w", id, err)
	}
	return nil
}

// Kind returns schemas.WebhookTargetEndpoint.
func (s *EndpointStore) Kind() string { return schemas.WebhookTargetEndpoint }

// Matching returns the enabled endpoints of workspace ws that want event
// as Hooks without secrets (the fan-out's Source; secrets never travel on
// the deliveries topic).
func (s *EndpointStore) Matching(ctx context.Context, ws, event string) ([]Hook, error) {
	eps, err := s.EndpointsFor(ctx, ws, event)
	if err != nil {
		return nil, err
	}
	out := make([]Hook, len(eps))
	for i, e := range eps {
		out[i] = Hook{Kind: schemas.WebhookTargetEndpoint, ID: e.ID, URL: e.URL}
	}
	return out, nil
}

// Lookup returns endpoint id of workspace ws with its current URL and the
// secrets that sign now (Secrets, at the store's clock) and whether it is
// failing; ok is false when it is deleted or disabled, and the delivery is
// skipped.
func (s *EndpointStore) Lookup(ctx context.Context, ws, id string) (h Hook, ok bool, err error) {
	var url string
	var enabled, failing bool
	var cur, prev []byte
	var until *time.Time
	err = s.pg.QueryRow(ctx, sqlEndpointLookup, ws, id).Scan(&url, &enabled, &cur, &prev, &until, &failing)
	if errors.Is(err, pgx.ErrNoRows) {
		return Hook{}, false, nil
	}
	if err != nil {
		return Hook{}, false, fmt.Errorf("webhook endpoint %s: %w", id, err)
	}
	if !enabled {
		return Hook{}, false, nil
	}
	secrets, err := s.open(id, cur, prev, until, s.now())
	if err != nil {
		return Hook{}, false, err
	}
	return Hook{Kind: schemas.WebhookTargetEndpoint, ID: id, URL: url, Secrets: secrets, Failing: failing}, true, nil
}

// Retire disables endpoint id of workspace ws with DisabledGone: its
// receiver answered 410 Gone (spec 6). An endpoint already gone is no
// error.
func (s *EndpointStore) Retire(ctx context.Context, ws, id string) error {
	if _, err := s.Disable(ctx, ws, id, DisabledGone); err != nil && !errors.Is(err, ErrEndpointNotFound) {
		return err
	}
	return nil
}

// one runs an UPDATE … RETURNING of one endpoint.
func (s *EndpointStore) one(ctx context.Context, what, sql string, args ...any) (Endpoint, error) {
	rows, err := s.query(ctx, what, sql, args...)
	if err != nil {
		return Endpoint{}, err
	}
	if len(rows) == 0 {
		return Endpoint{}, ErrEndpointNotFound
	}
	return rows[0], nil
}

// query runs sql and scans the endpoint columns every endpoint query
// returns, in order.
func (s *EndpointStore) query(ctx context.Context, what, sql string, args ...any) ([]Endpoint, error) {
	rows, err := s.pg.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Endpoint, error) {
		var e Endpoint
		var reason *string
		err := r.Scan(&e.ID, &e.URL, &e.Events, &e.Enabled, &reason, &e.DisabledAt, &e.FailingSince,
			&e.PreviousSecretExpiresAt, &e.CreatedAt, &e.UpdatedAt)
		if reason != nil {
			e.DisabledReason = *reason
		}
		e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
		for _, t := range []*time.Time{e.DisabledAt, e.FailingSince, e.PreviousSecretExpiresAt} {
			if t != nil {
				*t = t.UTC()
			}
		}
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if out == nil {
		out = []Endpoint{}
	}
	return out, nil
}
