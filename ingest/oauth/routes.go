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

// errorBody is an RFC 6749 5.2 error. Code repeats Error so that clients
// of the rest of the API, which read "code" (spec 7.1), read it here too
// (RFC 6749 lets a response carry more members).
type errorBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
	Code        string `json:"code"`
}

// fail answers an OAuth error; invalid_client after Basic authentication
// carries WWW-Authenticate (RFC 6749 5.2).
func fail(err error, basic bool) ingest.Result {
	var oe *Error
	if !errors.As(err, &oe) {
		return ingest.Result{Status: 500, Body: errorBody{Error: "server_error", Description: "internal error", Code: "server_error"}, Headers: noStore()}
	}
	h := noStore()
	if oe.Code == "invalid_client" && basic {
		h["WWW-Authenticate"] = `Basic realm="sendstream", charset="UTF-8"`
	}
	return ingest.Result{Status: oe.Status(), Body: errorBody{Error: oe.Code, Description: oe.Description, Code: oe.Code}, Headers: h}
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

// basic reads HTTP Basic client credentials (client_id and secret each
// form-encoded, RFC 6749 2.3.1). present is false without an
// Authorization header; any other scheme or a malformed value is
// invalid_client. It runs before the body is read, so a bad credential
// answers 401 whatever the body (the API's order of checks).
func basic(c *ingest.Call) (id, secret string, present bool, err error) {
	h := c.Header("Authorization")
	if h == "" {
		return "", "", false, nil
	}
	scheme, cred, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "basic") {
		return "", "", true, oerr("invalid_client", "client authentication failed: use HTTP Basic or client_secret_post")
	}
	raw, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	u, p, ok := strings.Cut(string(raw), ":")
	if derr != nil || !ok {
		return "", "", true, oerr("invalid_client", "client authentication failed: malformed Basic credentials")
	}
	bu, e1 := url.QueryUnescape(u)
	bp, e2 := url.QueryUnescape(p)
	if e1 != nil || e2 != nil || bu == "" {
		return "", "", true, oerr("invalid_client", "client authentication failed: malformed Basic credentials")
	}
	return bu, bp, true, nil
}

// request authenticates a Basic client first (so a bad credential
// answers 401 whatever the body, the API's order of checks), then reads
// the form and authenticates a client that sent its credentials there.
func (d Deps) request(ctx context.Context, c *ingest.Call) (v url.Values, app App, authenticated, isBasic bool, err error) {
	id, secret, isBasic, err := basic(c)
	if err != nil {
		return nil, App{}, false, isBasic, err
	}
	if isBasic {
		if app, err = d.authenticate(ctx, id, secret, true); err != nil {
			return nil, App{}, false, true, err
		}
	}
	v, oe := form(c)
	if oe != nil {
		return nil, App{}, false, isBasic, oe
	}
	if isBasic {
		if v.Has("client_secret") || v.Get("client_id") != "" && v.Get("client_id") != id {
			return nil, App{}, false, true, oerr("invalid_request", "use one client authentication method")
		}
		return v, app, true, true, nil
	}
	id = v.Get("client_id")
	if id == "" {
		return nil, App{}, false, false, oerr("invalid_client", "client authentication failed: no client_id")
	}
	app, err = d.authenticate(ctx, id, v.Get("client_secret"), v.Has("client_secret"))
	return v, app, err == nil && app.Type == TypeConfidential, false, err
}

// authenticate finds the client and checks its secret: a confidential
// client must present the right one, a public client none.
func (d Deps) authenticate(ctx context.Context, id, secret string, hasSecret bool) (App, error) {
	app, err := d.Store.appByClient(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return App{}, oerr("invalid_client", "client authentication failed")
	}
	if err != nil {
		return App{}, err
	}
	switch {
	case app.Type == TypePublic && hasSecret:
		return App{}, oerr("invalid_client", "a public client has no secret")
	case app.Type == TypePublic:
		return app, nil
	case !hasSecret || !app.checkSecret(secret):
		return App{}, oerr("invalid_client", "client authentication failed")
	}
	return app, nil
}

func (d Deps) token(c *ingest.Call) ingest.Result {
	ctx, cancel := context.WithTimeout(c.Ctx, 10*time.Second)
	defer cancel()
	v, app, authenticated, isBasic, err := d.request(ctx, c)
	if err != nil {
		return fail(err, isBasic)
	}
	if app.suspended {
		// RFC 6749 5.2 invalid_grant, as peers answer for a suspended or
		// disabled account (the resource owner's grant is not usable);
		// checked before a code is consumed or a refresh token rotated.
		return fail(oerr("invalid_grant", "the workspace is suspended: no token is issued"), isBasic)
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
		return fail(err, isBasic)
	}
	return ingest.Result{Status: 200, Body: t, Headers: noStore()}
}

// revoke is RFC 7009: the client authenticates; any token answers 200.
func (d Deps) revoke(c *ingest.Call) ingest.Result {
	ctx, cancel := context.WithTimeout(c.Ctx, 10*time.Second)
	defer cancel()
	v, app, _, isBasic, err := d.request(ctx, c)
	if err != nil {
		return fail(err, isBasic)
	}
	if v.Get("token") == "" {
		return fail(oerr("invalid_request", "token is required"), isBasic)
	}
	if err := d.Store.Revoke(ctx, app, v.Get("token")); err != nil {
		return fail(err, isBasic)
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
