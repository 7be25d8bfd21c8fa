package webhooks

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"time"

	"sendstream/deploy/admincli"
	"sendstream/ingest/auth"
	"sendstream/sinks/webhook"
)

// checkTimeout bounds the create-time DNS lookup of an endpoint's host.
const checkTimeout = 5 * time.Second

// AdminSettings are what the webhook-endpoint commands need beyond
// Postgres: the server's settings, read by the root package's config.
type AdminSettings struct {
	// Secret is the server secret (SENDSTREAM_SECRET or serve's generated
	// local one): endpoint secrets are encrypted under a key derived from
	// it, so it must be the server's.
	Secret string
	// AllowPrivate are the ranges SENDSTREAM_WEBHOOK_ALLOW_PRIVATE lets
	// through (local development and tests only), as for REST hooks.
	AllowPrivate []netip.Prefix
	// Resolver resolves endpoint hosts (default net.DefaultResolver).
	Resolver *net.Resolver
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
}

// AdminCommands are the dashboard endpoints' operator commands (DESIGN.md):
// webhook-endpoint create, list, enable, disable, delete and rotate-secret.
// settings is called once per command run; features.go lists them.
func AdminCommands(settings func() (AdminSettings, error)) []admincli.Command {
	a := endpointAdmin{settings: settings}
	return []admincli.Command{
		{Name: "webhook-endpoint create", Usage: "--workspace W --url U --events A,B [--secret S]", Run: a.create},
		{Name: "webhook-endpoint list", Usage: "--workspace W", Run: a.list},
		{Name: "webhook-endpoint enable", Usage: "--workspace W --id E", Run: a.enable},
		{Name: "webhook-endpoint disable", Usage: "--workspace W --id E", Run: a.disable},
		{Name: "webhook-endpoint delete", Usage: "--workspace W --id E", Run: a.delete},
		{Name: "webhook-endpoint rotate-secret", Usage: "--workspace W --id E", Run: a.rotate},
	}
}

type endpointAdmin struct {
	settings func() (AdminSettings, error)
}

// created is the answer of create and rotate-secret: the secret is shown
// this once.
type created struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

// create adds an endpoint → {"id","secret"}. The URL must be https:// and
// its host public (or in the allowed ranges); each event must be in the
// catalogue. Without --secret a whsec_ secret is generated.
func (a endpointAdmin) create(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	rawURL := fs.String("url", "", "https:// URL the deliveries are POSTed to")
	events := fs.String("events", "", "comma-separated event types (GET /api/v1/webhooks/events lists them)")
	secret := fs.String("secret", "", "signing secret (default: a generated whsec_ secret)")
	if err := admincli.ParseFlags(fs, args, "workspace", "url", "events"); err != nil {
		return nil, err
	}
	eps, err := a.open(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	e, sec, err := eps.Create(ctx, *ws, *rawURL, admincli.SplitList(*events), *secret)
	var ie *InputError
	if errors.As(err, &ie) {
		return nil, fmt.Errorf("--%s: %w", ie.Field, ie.Err)
	}
	if err != nil {
		return nil, err
	}
	return created{ID: e.ID, Secret: sec}, nil
}

// list prints the endpoints of a workspace → {"endpoints":[…]}, never
// their secrets.
func (a endpointAdmin) list(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	if err := admincli.ParseFlags(fs, args, "workspace"); err != nil {
		return nil, err
	}
	eps, err := a.open(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	list, err := eps.Store().List(ctx, *ws)
	if err != nil {
		return nil, err
	}
	return map[string][]webhook.Endpoint{"endpoints": list}, nil
}

// enable enables an endpoint again → {"id","enabled":true,…}.
func (a endpointAdmin) enable(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	return a.byID(ctx, env, fs, args, func(e *Endpoints, ws, id string) (any, error) {
		return e.Store().Enable(ctx, ws, id)
	})
}

// disable disables an endpoint → {"id","enabled":false,…}; nothing is
// delivered to it until it is enabled.
func (a endpointAdmin) disable(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	return a.byID(ctx, env, fs, args, func(e *Endpoints, ws, id string) (any, error) {
		return e.Store().Disable(ctx, ws, id, webhook.DisabledByOperator)
	})
}

// delete removes an endpoint → {"id","deleted":true}.
func (a endpointAdmin) delete(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	return a.byID(ctx, env, fs, args, func(e *Endpoints, ws, id string) (any, error) {
		if err := e.Store().Delete(ctx, ws, id); err != nil {
			return nil, err
		}
		return map[string]any{"id": id, "deleted": true}, nil
	})
}

// rotate gives an endpoint a new generated secret → {"id","secret"}; the
// old one keeps signing beside it for webhook.RotationOverlap.
func (a endpointAdmin) rotate(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string) (any, error) {
	return a.byID(ctx, env, fs, args, func(e *Endpoints, ws, id string) (any, error) {
		secret, err := e.RotateSecret(ctx, ws, id)
		if err != nil {
			return nil, err
		}
		return created{ID: id, Secret: secret}, nil
	})
}

// byID parses --workspace and --id and runs do; an id the workspace does
// not have is an error naming both.
func (a endpointAdmin) byID(ctx context.Context, env *admincli.Env, fs *flag.FlagSet, args []string,
	do func(e *Endpoints, ws, id string) (any, error)) (any, error) {
	ws := fs.String("workspace", "", "workspace id")
	id := fs.String("id", "", "endpoint id")
	if err := admincli.ParseFlags(fs, args, "workspace", "id"); err != nil {
		return nil, err
	}
	eps, err := a.open(ctx, env, *ws)
	if err != nil {
		return nil, err
	}
	out, err := do(eps, *ws, *id)
	if errors.Is(err, webhook.ErrEndpointNotFound) {
		return nil, fmt.Errorf("workspace %s has no webhook endpoint %s: %w", *ws, *id, err)
	}
	return out, err
}

// open reads the settings, checks that ws exists and returns the
// endpoints' manager.
func (a endpointAdmin) open(ctx context.Context, env *admincli.Env, ws string) (*Endpoints, error) {
	set, err := a.settings()
	if err != nil {
		return nil, err
	}
	pg, err := auth.WorkspacePG(ctx, env, ws)
	if err != nil {
		return nil, err
	}
	return NewEndpoints(pg, set)
}
