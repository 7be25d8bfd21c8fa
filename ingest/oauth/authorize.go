package oauth

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"html/template"
	"net/url"
	"slices"
	"strings"
	"time"

	"sendstream/ingest"
	"sendstream/ingest/members"
)

//go:embed consent.html
var consentHTML string

var consentPage = template.Must(template.New("consent").Parse(consentHTML))

// consent is what consent.html shows.
type consent struct {
	Error                               string
	AppName, WorkspaceName, Email       string
	ClientID, RedirectURI, Scope, State string
	CodeChallenge, CodeChallengeMethod  string
	Scopes                              []string
}

// AuthorizeRoutes are the consent page {site_url}/oauth/authorize: GET
// shows it to a signed-in member (or sends the browser to /login and
// back), POST approves or denies. sessions resolves the session cookie
// (members.Store). The POST is refused cross-origin like the sign-in form
// (Route.SameOrigin, net/http.CrossOriginProtection).
func AuthorizeRoutes(d Deps, sessions ingest.SessionResolver) []ingest.Route {
	a := authorizer{d: d, sessions: sessions}
	return []ingest.Route{
		{Method: "GET", Path: "/oauth/authorize", Credential: ingest.CredNone, Handle: a.show},
		{Method: "POST", Path: "/oauth/authorize", Credential: ingest.CredNone, SameOrigin: true, RawBody: true, Handle: a.decide},
	}
}

type authorizer struct {
	d        Deps
	sessions ingest.SessionResolver
}

// authRequest is a checked authorization request (RFC 6749 4.1.1, RFC
// 7636 4.3).
type authRequest struct {
	app                                  App
	redirectURI, scope, state, challenge string
	scopes                               []string
}

// check validates the request. A nil *Error with ok false means the
// client or redirect URI cannot be trusted: the page shows msg and never
// redirects (RFC 6749 4.1.2.1). Otherwise errors go back to the verified
// redirect URI.
func (a authorizer) check(ctx context.Context, v url.Values) (r authRequest, msg string, oe *Error) {
	app, err := a.d.Store.appByClient(ctx, v.Get("client_id"))
	if errors.Is(err, ErrNotFound) {
		return r, "Unknown app (client_id).", nil
	}
	if err != nil {
		return r, "The app cannot be read right now; try again later.", nil
	}
	r = authRequest{app: app, redirectURI: v.Get("redirect_uri"), state: v.Get("state"), challenge: v.Get("code_challenge")}
	if !slices.Contains(app.RedirectURIs, r.redirectURI) {
		return r, "The redirect_uri is not registered for this app.", nil
	}
	switch {
	case v.Get("response_type") != "code":
		return r, "", oerr("unsupported_response_type", "response_type must be code")
	case !app.Has(GrantAuthorizationCode):
		return r, "", oerr("unauthorized_client", "this app may not use the authorization_code grant")
	case r.challenge == "" && app.Type == TypePublic:
		return r, "", oerr("invalid_request", "a public app must send code_challenge (PKCE, S256)")
	case r.challenge != "" && v.Get("code_challenge_method") != "S256":
		return r, "", oerr("invalid_request", "code_challenge_method must be S256")
	case r.challenge != "" && len(r.challenge) != 43:
		return r, "", oerr("invalid_request", "code_challenge must be a base64url SHA-256 (43 characters)")
	}
	if r.scopes, oe = narrow(v.Get("scope"), app.Scopes); oe != nil {
		return r, "", oe
	}
	r.scope = joinScopes(r.scopes)
	return r, "", nil
}

// back sends the browser to the verified redirect URI with params and
// state (RFC 6749 4.1.2).
func back(r authRequest, params url.Values) ingest.Result {
	if r.state != "" {
		params.Set("state", r.state)
	}
	u := r.redirectURI
	if strings.Contains(u, "?") {
		u += "&" + params.Encode()
	} else {
		u += "?" + params.Encode()
	}
	return ingest.Result{Status: 303, Headers: map[string]string{"Location": u}}
}

func backError(r authRequest, oe *Error) ingest.Result {
	return back(r, url.Values{"error": {oe.Code}, "error_description": {oe.Description}})
}

// member returns the signed-in member, or ok false when there is none.
func (a authorizer) member(c *ingest.Call) (ingest.Principal, bool, error) {
	tok := ingest.SessionToken(c.Header("Cookie"))
	if tok == "" || a.sessions == nil {
		return ingest.Principal{}, false, nil
	}
	p, _, err := a.sessions.ResolveSession(c.Ctx, tok, time.Now())
	if errors.Is(err, ingest.ErrNoSession) {
		return ingest.Principal{}, false, nil
	}
	return p, err == nil, err
}

func (a authorizer) show(c *ingest.Call) ingest.Result {
	v := url.Values{}
	for _, k := range []string{"client_id", "redirect_uri", "response_type", "scope", "state", "code_challenge", "code_challenge_method"} {
		if c.HasQuery(k) {
			v.Set(k, c.Query(k))
		}
	}
	r, msg, oe := a.check(c.Ctx, v)
	if msg != "" {
		return page(400, consent{Error: msg}, "")
	}
	if oe != nil {
		return backError(r, oe)
	}
	p, ok, err := a.member(c)
	if err != nil {
		return page(503, consent{Error: "Signing in is unavailable right now; try again later."}, "")
	}
	if !ok {
		return ingest.Result{Status: 303, Headers: map[string]string{"Location": "/login?next=" + url.QueryEscape("/oauth/authorize?"+v.Encode())}}
	}
	if m := a.refuse(r, p); m != "" {
		return page(403, consent{Error: m}, "")
	}
	return page(200, consent{AppName: r.app.Name, WorkspaceName: p.WorkspaceName, Email: p.Email, ClientID: r.app.ClientID,
		RedirectURI: r.redirectURI, Scope: r.scope, State: r.state, CodeChallenge: r.challenge,
		CodeChallengeMethod: v.Get("code_challenge_method"), Scopes: r.scopes}, r.redirectURI)
}

// refuse says why the signed-in member may not approve, or "".
func (a authorizer) refuse(r authRequest, p ingest.Principal) string {
	if p.Workspace != r.app.Workspace {
		return "This app belongs to another workspace than the one you are signed in to."
	}
	if !members.Can(members.FromPrincipal(p), members.PermAPIKeys) {
		return "Only a member with the API-keys permission may connect apps."
	}
	return ""
}

func (a authorizer) decide(c *ingest.Call) ingest.Result {
	v, err := url.ParseQuery(string(c.Body))
	if err != nil {
		return page(400, consent{Error: "Malformed form."}, "")
	}
	r, msg, oe := a.check(c.Ctx, v)
	if msg != "" {
		return page(400, consent{Error: msg}, "")
	}
	if oe != nil {
		return backError(r, oe)
	}
	p, ok, err := a.member(c)
	if err != nil || !ok {
		return page(401, consent{Error: "Your session has ended: sign in and start again from the app."}, "")
	}
	if m := a.refuse(r, p); m != "" {
		return page(403, consent{Error: m}, "")
	}
	if v.Get("decision") != "approve" {
		return backError(r, oerr("access_denied", "the member denied the request"))
	}
	code, err := a.d.Store.IssueCode(c.Ctx, CodeRequest{ClientID: r.app.ClientID, Workspace: p.Workspace, MemberID: p.MemberID,
		Scope: r.scope, RedirectURI: r.redirectURI, CodeChallenge: r.challenge})
	if errors.As(err, &oe) {
		return backError(r, oe)
	}
	if err != nil {
		return backError(r, oerr("server_error", "the code could not be issued"))
	}
	return back(r, url.Values{"code": {code}})
}

// page renders consent.html. The page may not be framed; its form may
// post here and the answer may redirect to the app's redirect URI, so
// form-action names that origin too (browsers apply form-action to the
// redirect that follows a post).
func page(status int, pg consent, redirectURI string) ingest.Result {
	var b bytes.Buffer
	if err := consentPage.Execute(&b, pg); err != nil {
		return ingest.Fail(500, "internal_error", "rendering the consent page: "+err.Error())
	}
	formAction := "'self'"
	if u, err := url.Parse(redirectURI); err == nil && u.Host != "" {
		formAction += " " + u.Scheme + "://" + u.Host
	}
	return ingest.Result{Status: status, Raw: b.Bytes(), ContentType: "text/html; charset=utf-8", Headers: map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action " + formAction + "; frame-ancestors 'none'; base-uri 'none'",
		"X-Frame-Options":         "DENY",
	}}
}
