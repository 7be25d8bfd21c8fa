package webhooks

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/sinks/webhook"
)

// InputError is a refusal of what the caller asked for that the caller can
// fix: Field names the input ("url", "events", "secret"), Err says why.
// Nothing was stored. The admin commands print it as --<field>: <err>; the
// dashboard shows it on the page.
type InputError struct {
	Field string
	Err   error
}

func (e *InputError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Endpoints creates and rotates dashboard webhook endpoints with the
// checks spec 6 asks for: an https:// URL whose host resolves only to
// public addresses (or to the ranges SENDSTREAM_WEBHOOK_ALLOW_PRIVATE lets
// through), known event types, a valid secret. The webhook-endpoint admin
// commands and the dashboard's webhooks page both go through it. Safe for
// concurrent use.
type Endpoints struct {
	store *webhook.EndpointStore
	guard *webhook.Guard
}

// NewEndpoints returns Endpoints on pg with the server's settings (the
// secret that encrypts endpoint secrets, the allowed private ranges).
func NewEndpoints(pg *pgxpool.Pool, set AdminSettings) (*Endpoints, error) {
	store, err := webhook.NewEndpointStore(pg, webhook.EndpointStoreConfig{Secret: set.Secret, Now: set.Now})
	if err != nil {
		return nil, err
	}
	guard := webhook.NewGuard(webhook.GuardConfig{AllowPrivate: set.AllowPrivate, Resolver: set.Resolver})
	return &Endpoints{store: store, guard: guard}, nil
}

// Store is the endpoint store, for what needs no checks: list, enable,
// disable, delete.
func (e *Endpoints) Store() *webhook.EndpointStore { return e.store }

// Create stores a new enabled endpoint of workspace ws posting events to
// rawURL and returns it with its secret (shown once): secret when given
// (validated), else a generated whsec_ one. The host is resolved now and
// refused when any of its addresses is private. An *InputError says what
// to fix; nothing was stored then.
func (e *Endpoints) Create(ctx context.Context, ws, rawURL string, events []string, secret string) (webhook.Endpoint, string, error) {
	t, err := webhook.ParseTarget(rawURL, true)
	if err != nil {
		return webhook.Endpoint{}, "", &InputError{Field: "url", Err: err}
	}
	evs, err := webhook.CheckEvents(events)
	if err != nil {
		return webhook.Endpoint{}, "", &InputError{Field: "events", Err: err}
	}
	if secret == "" {
		if secret, err = webhook.NewSecret(); err != nil {
			return webhook.Endpoint{}, "", err
		}
	} else if err := webhook.ValidateSecret(secret); err != nil {
		return webhook.Endpoint{}, "", &InputError{Field: "secret", Err: err}
	}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	err = e.guard.CheckTarget(cctx, t)
	cancel()
	var te *webhook.TargetError
	switch {
	case errors.As(err, &te):
		return webhook.Endpoint{}, "", &InputError{Field: "url", Err: err}
	case err != nil:
		return webhook.Endpoint{}, "", &InputError{Field: "url", Err: fmt.Errorf("the host could not be resolved right now, nothing was stored: %w", err)}
	}
	ep, err := e.store.Create(ctx, ws, webhook.NewEndpoint{URL: t.URL, Events: evs, Secret: secret})
	if err != nil {
		return webhook.Endpoint{}, "", err
	}
	return ep, secret, nil
}

// RotateSecret gives endpoint id of ws a new generated secret and returns
// it (shown once); the old one keeps signing beside it for
// webhook.RotationOverlap. webhook.ErrEndpointNotFound when ws has no such
// endpoint.
func (e *Endpoints) RotateSecret(ctx context.Context, ws, id string) (string, error) {
	secret, err := webhook.NewSecret()
	if err != nil {
		return "", err
	}
	if _, err := e.store.RotateSecret(ctx, ws, id, secret); err != nil {
		return "", err
	}
	return secret, nil
}
