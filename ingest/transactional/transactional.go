// Package transactional is transactional email at the HTTP edge (spec 2.4,
// 3.1, 4.2-4.4, 7.2): POST /v1/transactional/send and /validate, the
// message list and status lookup, the one-click unsubscribe page at the site
// root, and the provider report endpoints (Amazon SES through SNS, and a
// generic JSON format). It owns templates, send policies, sending domains
// and the suppression list (Store, SQL in sql/*.sql).
//
// A send is decided synchronously: input, policy, template, sender domain,
// suppression, contact, Liquid syntax and variables, then the message is
// stored (status queued, unique per externalId) and its
// transactional.send.v1 envelope returned for the server to publish with
// acks=all before it answers. The delivery stage renders and hands it to
// the provider. Handlers parse, call the service and answer; no SQL reaches
// them and no HTTP types reach the Store.
package transactional

import (
	"errors"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/ingest"
	"sendstream/ingest/contacts"
	"sendstream/schemas"
	"sendstream/sinks/email"
	"sendstream/sinks/email/render"
)

// Scopes of spec 5.1.
const (
	ScopeWrite = "transactional:write"
	ScopeRead  = "transactional:read"
)

// Deps is what the transactional routes need.
type Deps struct {
	PG *pgxpool.Pool
	// Store is the process's message store (nil: NewStore(PG)); passing
	// it shares its pool and batchers with its other readers (the
	// dashboard's message log).
	Store *Store
	// Contacts upserts the `contact` object of a send; nil ignores it for
	// storage (it still renders).
	Contacts *contacts.Store
	// Engine parses and caches templates (default: render.Shared with the
	// default budget, the cache the delivery stage uses too).
	Engine  *render.Engine
	SiteURL string // the site root (unsubscribe links)
	// Secret signs unsubscribe links; the delivery stage must use the same.
	Secret string
	// DefaultFromEmail is the sender when neither the request, the send
	// policy nor a workspace domain gives one (default
	// "noreply@sendstream.local").
	DefaultFromEmail string
	// SNS verifies Amazon SNS notifications (default: certificates fetched
	// only from https://sns.<region>.amazonaws.com, subscriptions confirmed
	// there).
	SNS    *SNSVerifier
	Logger *slog.Logger
}

// Validate reports missing dependencies.
func (d Deps) Validate() error {
	if d.PG == nil {
		return errors.New("transactional: Deps.PG is required")
	}
	if d.Secret == "" {
		return errors.New("transactional: Deps.Secret is required (it signs unsubscribe links)")
	}
	return nil
}

// Routes returns the transactional endpoints (spec 4.1 scopes and limits;
// insufficient_scope answers omit requiredScope, spec 5.1 rule 4), the
// unsubscribe page GET/POST /unsubscribe/{token} at the site root and the
// provider report endpoints POST /api/providers/ses (SNS-signed) and POST
// /api/providers/reports (API key). It panics when Deps are invalid.
func Routes(d Deps) []ingest.Route {
	if err := d.Validate(); err != nil {
		panic(err)
	}
	if d.Engine == nil {
		d.Engine = render.Shared(render.DefaultBudget())
	}
	if d.DefaultFromEmail == "" {
		d.DefaultFromEmail = email.DefaultFromEmail
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.SNS == nil {
		d.SNS = NewSNSVerifier(SNSConfig{})
	}
	store := d.Store
	if store == nil {
		store = NewStore(d.PG)
	}
	a := &api{
		svc:     &service{store: store, contacts: d.Contacts, engine: d.Engine, defFrom: d.DefaultFromEmail, tpls: map[string]*Template{}},
		sources: schemas.NewSourceCache(32<<20, true),
		store:   store,
		site:    strings.TrimRight(d.SiteURL, "/"),
		secret:  d.Secret,
		sns:     d.SNS,
		log:     d.Logger.With("feature", "transactional"),
	}
	route := func(method, path, scope string, limit int, h func(*ingest.Call) ingest.Result) ingest.Route {
		return ingest.Route{Method: method, Path: path, Credential: ingest.CredKey, Scope: scope, ScopeInError: false,
			Limit: limit, Logged: true, Handle: h}
	}
	return []ingest.Route{
		route("POST", "/api/v1/transactional/send", ScopeWrite, 100, a.send),
		route("POST", "/api/v1/transactional/validate", ScopeWrite, 100, a.validate),
		route("GET", "/api/v1/transactional", ScopeRead, 60, a.list),
		route("GET", "/api/v1/transactional/{messageId}/status", ScopeRead, 100, a.status),
		{Method: "GET", Path: "/unsubscribe/{token}", Credential: ingest.CredNone, Handle: a.unsubscribePage},
		{Method: "POST", Path: "/unsubscribe/{token}", Credential: ingest.CredNone, RawBody: true, BodyCap: 64 << 10, Handle: a.unsubscribe},
		{Method: "POST", Path: "/api/providers/ses", Credential: ingest.CredNone, RawBody: true, BodyCap: 256 << 10, Handle: a.sesReport},
		{Method: "POST", Path: "/api/providers/reports", Credential: ingest.CredKey, Scope: ScopeWrite, Limit: 600, Handle: a.genericReport},
	}
}
