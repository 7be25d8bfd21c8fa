package oauth

import (
	"context"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"time"

	"sendstream/ingest"
	"sendstream/ingest/auth"
)

// Deps is what the routes need. SiteURL is the issuer (RFC 8414).
type Deps struct {
	Store   *Store
	SiteURL string
}

// Routes are POST /api/oauth/token, POST /api/oauth/revoke and GET
// /.well-known/oauth-authorization-server (DESIGN.md "URLs").
func Routes(d Deps) []ingest.Route {
	return []ingest.Route{
		{Method: "POST", Path: "/api/oauth/token", Credential: ingest.CredNone, RawBody: true, Handle: d.token},
		{Method: "POST", Path: "/api/oauth/revoke", Credential: ingest.CredNone, RawBody: true, Handle: d.revoke},
		{Method: "GET", Path: "/.well-known/oauth-authorization-server", Credential: ingest.CredNone, Handle: d.metadata},
	}
}

// noStore are the headers of every token-endpoint answer (RFC 6749 5.1).
func noStore() map[string]string {
	return map[string]string{"Cache-Control": "no-store", "Pragma": "no-cache"}
}

type errorBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// fail answers an OAuth error; invalid_client after Basic authentication
// carries WWW-Authenticate (RFC 6749 5.2).
func fail(err error, basic bool) ingest.Result {
	var oe *Error
	if !errors.As(err, &oe) {
		return ingest.Result{Status: 500, Body: errorBody{Error: "server_error", Description: "internal error"}, Headers: noStore()}
	}
	h := noStore()
	if oe.Code == "invalid_client" && basic {
		h["WWW-Authenticate"] = `Basic realm="sendstream", charset="UTF-8"`
	}
	return ingest.Result{Status: oe.Status(), Body: errorBody{Error: oe.Code, Description: oe.Description}, Headers: h}
}

// form parses a form-encoded body; a parameter sent twice is
// invalid_request (RFC 6749 3.1, 3.2).
func form(c *ingest.Call) (url.Values, *Error) {
	ct, _, _ := strings.Cut(c.Header("Content-Type"), ";")
	if !strings.EqualFold(strings.TrimSpace(ct), "application/x-www-form-urlencoded") {
		return nil, oerr("invalid_request", "send the parameters form-encoded (application/x-www-form-urlencoded)")
	}
	v, err := url.ParseQuery(string(c.Body))
	if err != nil {
		return nil, oerr("invalid_request", "malformed form body")
	}
	for k, vs := range v {
		if len(vs) > 1 {
			return nil, oerr("invalid_request", "parameter %s sent more than once", k)
		}
	}
	return v, nil
}

// client authenticates the caller: HTTP Basic (client_id and secret
// form-encoded, RFC 6749 2.3.1) or client_id/client_secret in the body.
// A public app names itself with client_id only; authenticated is then
// false. basic reports that the Basic scheme was used.
func (d Deps) client(ctx context.Context, c *ingest.Call, v url.Values) (app App, authenticated, basic bool, err error) {
	id, secret := v.Get("client_id"), v.Get("client_secret")
	hasSecret := v.Has("client_secret")
	if h := c.Header("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "basic") {
			return App{}, false, false, oerr("invalid_client", "unsupported client authentication scheme")
		}
		basic = true
		raw, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		u, p, ok := strings.Cut(string(raw), ":")
		if derr != nil || !ok {
			return App{}, false, true, oerr("invalid_client", "malformed Basic credentials")
		}
		bu, e1 := url.QueryUnescape(u)
		bp, e2 := url.QueryUnescape(p)
		if e1 != nil || e2 != nil || hasSecret || id != "" && id != bu {
			return App{}, false, true, oerr("invalid_request", "use one client authentication method")
		}
		id, secret, hasSecret = bu, bp, true
	}
	if id == "" {
		return App{}, false, basic, oerr("invalid_client", "client authentication failed: no client_id")
	}
	app, err = d.Store.appByClient(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return App{}, false, basic, oerr("invalid_client", "client authentication failed")
	}
	if err != nil {
		return App{}, false, basic, err
	}
	switch {
	case app.Type == TypePublic && hasSecret:
		return App{}, false, basic, oerr("invalid_client", "a public client has no secret")
	case app.Type == TypePublic:
		return app, false, basic, nil
	case !hasSecret || !app.checkSecret(secret):
		return App{}, false, basic, oerr("invalid_client", "client authentication failed")
	}
	return app, true, basic, nil
}

func (d Deps) token(c *ingest.Call) ingest.Result {
	ctx, cancel := context.WithTimeout(c.Ctx, 10*time.Second)
	defer cancel()
	v, oe := form(c)
	if oe != nil {
		return fail(oe, false)
	}
	app, authenticated, basic, err := d.client(ctx, c, v)
	if err != nil {
		return fail(err, basic)
	}
	var t Tokens
	switch g := v.Get("grant_type"); g {
	case GrantClientCredentials:
		t, err = d.Store.ClientCredentials(ctx, app, v.Get("scope"))
	case GrantAuthorizationCode:
		t, err = d.Store.ExchangeCode(ctx, app, authenticated, v.Get("code"), v.Get("redirect_uri"), v.Get("code_verifier"))
	case GrantRefreshToken:
		if app.Type == TypeConfidential && !authenticated {
			err = oerr("invalid_client", "client authentication failed")
		} else {
			t, err = d.Store.Refresh(ctx, app, v.Get("refresh_token"), v.Get("scope"))
		}
	case "":
		err = oerr("invalid_request", "grant_type is required")
	default:
		err = oerr("unsupported_grant_type", "grant_type %q is not supported", g)
	}
	if err != nil {
		return fail(err, basic)
	}
	return ingest.Result{Status: 200, Body: t, Headers: noStore()}
}

// revoke is RFC 7009: the client authenticates; any token answers 200.
func (d Deps) revoke(c *ingest.Call) ingest.Result {
	ctx, cancel := context.WithTimeout(c.Ctx, 10*time.Second)
	defer cancel()
	v, oe := form(c)
	if oe != nil {
		return fail(oe, false)
	}
	app, _, basic, err := d.client(ctx, c, v)
	if err != nil {
		return fail(err, basic)
	}
	if v.Get("token") == "" {
		return fail(oerr("invalid_request", "token is required"), basic)
	}
	if err := d.Store.Revoke(ctx, app, v.Get("token")); err != nil {
		return fail(err, basic)
	}
	return ingest.Result{Status: 200, Raw: []byte("{}"), RawJSON: true, Headers: noStore()}
}

// Metadata is the RFC 8414 authorization server metadata.
type Metadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	ScopesSupported                   []string `json:"scopes_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	RevocationEndpointAuthMethods     []string `json:"revocation_endpoint_auth_methods_supported"`
}

func (d Deps) metadata(*ingest.Call) ingest.Result {
	site := strings.TrimSuffix(d.SiteURL, "/")
	methods := []string{"client_secret_basic", "client_secret_post", "none"}
	return ingest.OK(200, Metadata{
		Issuer:                            site,
		AuthorizationEndpoint:             site + "/oauth/authorize",
		TokenEndpoint:                     site + "/api/oauth/token",
		RevocationEndpoint:                site + "/api/oauth/revoke",
		GrantTypesSupported:               Grants,
		ResponseTypesSupported:            []string{"code"},
		CodeChallengeMethodsSupported:     []string{"S256"},
		ScopesSupported:                   auth.Scopes,
		TokenEndpointAuthMethodsSupported: methods,
		RevocationEndpointAuthMethods:     methods,
	})
}
