package contacts

import (
	"log/slog"
	"strings"

	"sendstream/ingest"
)

// Scopes of spec 5.1 for these routes.
const (
	ScopeRead  = "contacts:read"
	ScopeWrite = "contacts:write"
)

// formBodyCap bounds a hosted sign-up form post.
const formBodyCap = 64 << 10

// Deps is what the contacts routes need.
type Deps struct {
	Store   *Store
	Signer  *Signer      // signs and checks double opt-in links
	SiteURL string       // the site root, for links in confirmation emails
	Logger  *slog.Logger // nil means slog.Default()
}

// Routes returns the contacts and lists endpoints (spec 4.5, 60 requests per
// minute each, scopes of 5.1 with requiredScope in 403s) and the public
// pages at the site root: the hosted sign-up form GET/POST /forms/{listId}
// and the double opt-in confirmation GET /confirm?token=.
func Routes(d Deps) []ingest.Route {
	a := &api{store: d.Store, signer: d.Signer, site: strings.TrimRight(d.SiteURL, "/"), log: d.Logger}
	if a.log == nil {
		a.log = slog.Default()
	}
	v1 := func(method, path, scope string, h func(*ingest.Call) ingest.Result) ingest.Route {
		return ingest.Route{Method: method, Path: path, Credential: ingest.CredKey, Scope: scope, ScopeInError: true,
			Limit: 60, Logged: true, Handle: h}
	}
	return []ingest.Route{
		v1("GET", "/api/v1/contacts", ScopeRead, a.page),
		v1("POST", "/api/v1/contacts", ScopeWrite, a.upsert),
		v1("GET", "/api/v1/contacts/search", ScopeRead, a.search),
		v1("GET", "/api/v1/lists", ScopeRead, a.lists),
		v1("POST", "/api/v1/lists/{id}/subscribe", ScopeWrite, a.subscribe),
		v1("POST", "/api/v1/lists/{id}/unsubscribe", ScopeWrite, a.unsubscribe),
		{Method: "GET", Path: "/forms/{listId}", Credential: ingest.CredNone, Handle: a.formShow},
		{Method: "POST", Path: "/forms/{listId}", Credential: ingest.CredNone, RawBody: true, BodyCap: formBodyCap, Handle: a.formSubmit},
		{Method: "GET", Path: "/confirm", Credential: ingest.CredNone, Handle: a.confirm},
	}
}
