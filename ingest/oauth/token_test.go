package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"sendstream/ingest/auth"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/members"
)

func params(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// TestClientCredentials: golang.org/x/oauth2 gets a token, which works on
// /api/v1/contacts with its scopes and describes itself on /api/v1/me; the
// token endpoint's errors follow RFC 6749 5.2.
func TestClientCredentials(t *testing.T) {
	e := start(t)
	ws, owner := e.workspace(auth.PlanPro, members.RoleAdmin, "")
	a, secret := e.app(confidential(ws, owner, GrantClientCredentials))
	ctx := context.Background()
	cc := clientcredentials.Config{ClientID: a.ClientID, ClientSecret: secret, TokenURL: e.h.URL + "/api/oauth/token",
		Scopes: []string{auth.ScopeContactsRead}}
	tok, err := cc.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.AccessToken, AccessTokenPrefix) || tok.RefreshToken != "" || tok.TokenType != "Bearer" ||
		tok.Extra("expires_in") != 3600.0 || tok.Extra("scope") != auth.ScopeContactsRead {
		t.Fatalf("token %+v scope %v", tok, tok.Extra("scope"))
	}
	resp, err := cc.Client(ctx).Get(e.h.URL + "/api/v1/contacts")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/v1/contacts with the token: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if st, body := e.call("POST", "/api/v1/contacts", tok.AccessToken); st != 403 || !strings.Contains(body, `"requiredScope":"contacts:write"`) {
		t.Fatalf("POST /api/v1/contacts with a contacts:read token: %d %s", st, body)
	}
	st, body := e.call("GET", "/api/v1/me", tok.AccessToken)
	var me struct {
		Workspace struct{ ID string }
		Key       struct {
			Kind       string
			Scopes     []string
			FullAccess bool
		}
		App    struct{ ID string }
		Member struct{ ID string }
	}
	if err := json.Unmarshal([]byte(body), &me); st != 200 || err != nil || me.Workspace.ID != ws || me.Key.Kind != auth.KindOAuth ||
		me.Key.FullAccess || len(me.Key.Scopes) != 1 || me.App.ID != a.ID || me.Member.ID != owner {
		t.Fatalf("/api/v1/me: %d %s", st, body)
	}
	// client_secret_post works too; the answer is not cacheable.
	r, m := e.post("/api/oauth/token", params("grant_type", "client_credentials", "client_id", a.ClientID, "client_secret", secret), "", "")
	if r.StatusCode != 200 || r.Header.Get("Cache-Control") != "no-store" || m["scope"] != auth.ScopeContactsRead || m["refresh_token"] != nil {
		t.Fatalf("client_secret_post: %d %v %v", r.StatusCode, r.Header, m)
	}
	r, m = e.post("/api/oauth/token", params("grant_type", "client_credentials"), a.ClientID, secret+"x")
	wantOAuthError(t, "wrong secret", r, m, 401, "invalid_client")
	if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("invalid_client after Basic without WWW-Authenticate: %v", r.Header)
	}
	r, m = e.post("/api/oauth/token", params("grant_type", "client_credentials", "scope", "contacts:write"), a.ClientID, secret)
	wantOAuthError(t, "scope beyond the app's", r, m, 400, "invalid_scope")
	r, m = e.post("/api/oauth/token", params("grant_type", "password"), a.ClientID, secret)
	wantOAuthError(t, "password grant", r, m, 400, "unsupported_grant_type")
	r, m = e.post("/api/oauth/token", params("grant_type", "authorization_code", "code", "x", "redirect_uri", "https://app.example.com/cb"), a.ClientID, secret)
	wantOAuthError(t, "grant the app lacks", r, m, 400, "unauthorized_client")
	r, m = e.post("/api/oauth/token", params("grant_type", "client_credentials", "client_secret", secret), a.ClientID, secret)
	if r.StatusCode != 400 || m["error"] != "invalid_request" {
		t.Fatalf("two authentication methods: %d %v", r.StatusCode, m)
	}
}

// TestAuthorizationCodePKCE: a public app must use PKCE; the redirect URI
// must match exactly; golang.org/x/oauth2 exchanges the code with its
// verifier; a code used twice revokes what it issued.
func TestAuthorizationCodePKCE(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	ws, approver := e.workspace(auth.PlanPro, members.RoleCustom, members.PermAPIKeys)
	support := e.member(ws, members.RoleSupport, "")
	const cb = "http://localhost:8765/callback"
	a, _ := e.app(NewApp{Workspace: ws, Name: "cli", Type: TypePublic, Grants: []string{GrantAuthorizationCode, GrantRefreshToken},
		Scopes: []string{auth.ScopeContactsRead, auth.ScopeContactsWrite}, RedirectURIs: []string{cb}, CreatedBy: approver})
	verifier := oauth2.GenerateVerifier()
	req := CodeRequest{ClientID: a.ClientID, Workspace: ws, MemberID: approver, Scope: "contacts:read", RedirectURI: cb,
		CodeChallenge: oauth2.S256ChallengeFromVerifier(verifier)}
	refused := map[string]func(r *CodeRequest){
		"public app without code_challenge": func(r *CodeRequest) { r.CodeChallenge = "" },
		"redirect URI one character off":    func(r *CodeRequest) { r.RedirectURI = cb + "/" },
		"support staff approving":           func(r *CodeRequest) { r.MemberID = support },
		"scope beyond the app's":            func(r *CodeRequest) { r.Scope = "events:write" },
		"app of another workspace":          func(r *CodeRequest) { r.Workspace = "other" },
	}
	for name, f := range refused {
		r := req
		f(&r)
		var oe *Error
		if _, err := e.store.IssueCode(ctx, r); !errors.As(err, &oe) {
			t.Errorf("%s: err %v, want an OAuth error", name, err)
		}
	}
	conf := oauth2.Config{ClientID: a.ClientID, RedirectURL: cb,
		Endpoint: oauth2.Endpoint{TokenURL: e.h.URL + "/api/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	code := issueCode(t, e, req)
	if _, err := conf.Exchange(ctx, code, oauth2.VerifierOption(oauth2.GenerateVerifier())); err == nil {
		t.Fatal("exchange with the wrong verifier succeeded")
	}
	code = issueCode(t, e, req)
	r, m := e.post("/api/oauth/token", params("grant_type", "authorization_code", "code", code, "redirect_uri", cb+"/", "client_id", a.ClientID, "code_verifier", verifier), "", "")
	wantOAuthError(t, "redirect_uri one character off at the token endpoint", r, m, 400, "invalid_grant")
	code = issueCode(t, e, req)
	r, m = e.post("/api/oauth/token", params("grant_type", "authorization_code", "code", code, "redirect_uri", cb, "client_id", a.ClientID), "", "")
	wantOAuthError(t, "public client without code_verifier", r, m, 400, "invalid_grant")

	code = issueCode(t, e, req)
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if tok.RefreshToken == "" || !strings.HasPrefix(tok.AccessToken, AccessTokenPrefix) || tok.Extra("expires_in") != 3600.0 {
		t.Fatalf("code grant token %+v", tok)
	}
	resp, err := conf.Client(ctx, tok).Get(e.h.URL + "/api/v1/contacts")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/v1/contacts: %v %v", resp, err)
	}
	resp.Body.Close()
	if st, body := e.call("GET", "/api/v1/me", tok.AccessToken); st != 200 || !strings.Contains(body, `"member":{"id":"`+approver+`"}`) {
		t.Fatalf("/api/v1/me acts as the approver: %d %s", st, body)
	}
	// The same code again: refused, and the tokens it issued stop working.
	r, m = e.post("/api/oauth/token", params("grant_type", "authorization_code", "code", code, "redirect_uri", cb, "client_id", a.ClientID, "code_verifier", verifier), "", "")
	wantOAuthError(t, "code reuse", r, m, 400, "invalid_grant")
	eventually(t, "access token refused after code reuse", func() bool {
		st, _ := e.call("GET", "/api/v1/contacts", tok.AccessToken)
		return st == 401
	})
	r, m = e.post("/api/oauth/token", params("grant_type", "refresh_token", "refresh_token", tok.RefreshToken, "client_id", a.ClientID), "", "")
	wantOAuthError(t, "refresh token after code reuse", r, m, 400, "invalid_grant")
}

func issueCode(t *testing.T, e *env, r CodeRequest) string {
	t.Helper()
	code, err := e.store.IssueCode(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// TestRefreshRotation: every refresh rotates; presenting a replaced
// refresh token revokes the connection (its newest tokens too).
func TestRefreshRotation(t *testing.T) {
	e := start(t)
	ws, owner := e.workspace(auth.PlanPro, members.RoleOwner, "")
	a, secret := e.app(confidential(ws, owner, GrantAuthorizationCode, GrantRefreshToken))
	const cb = "https://app.example.com/cb"
	code := issueCode(t, e, CodeRequest{ClientID: a.ClientID, Workspace: ws, MemberID: owner, RedirectURI: cb})
	r, m := e.post("/api/oauth/token", params("grant_type", "authorization_code", "code", code, "redirect_uri", cb), a.ClientID, secret)
	if r.StatusCode != 200 || m["refresh_token"] == nil {
		t.Fatalf("code exchange with Basic: %d %v", r.StatusCode, m)
	}
	r1 := m["refresh_token"].(string)
	r, m = e.post("/api/oauth/token", params("grant_type", "refresh_token", "refresh_token", r1), a.ClientID, secret)
	if r.StatusCode != 200 || m["refresh_token"] == r1 || m["refresh_token"] == nil || m["scope"] != auth.ScopeContactsRead {
		t.Fatalf("refresh: %d %v", r.StatusCode, m)
	}
	r2, access2 := m["refresh_token"].(string), m["access_token"].(string)
	if st, _ := e.call("GET", "/api/v1/contacts", access2); st != 200 {
		t.Fatalf("refreshed access token: %d", st)
	}
	r, m = e.post("/api/oauth/token", params("grant_type", "refresh_token", "refresh_token", r1), a.ClientID, secret)
	wantOAuthError(t, "old refresh token", r, m, 400, "invalid_grant")
	eventually(t, "access token refused after old refresh reuse", func() bool {
		st, _ := e.call("GET", "/api/v1/contacts", access2)
		return st == 401
	})
	r, m = e.post("/api/oauth/token", params("grant_type", "refresh_token", "refresh_token", r2), a.ClientID, secret)
	wantOAuthError(t, "newest refresh token of a revoked connection", r, m, 400, "invalid_grant")
}

// TestRevokeDeleteAndDiscovery: RFC 7009 answers 200 for any token and
// revokes at once on a second server process too; deleting an app revokes
// its connections; RFC 8414 metadata lists the endpoints.
func TestRevokeDeleteAndDiscovery(t *testing.T) {
	e := start(t)
	other := e.h.Second(t, ingesttest.Options{Sessions: e.members})
	listen(t, other)
	ws, owner := e.workspace(auth.PlanPro, members.RoleOwner, "")
	a, secret := e.app(confidential(ws, owner, GrantClientCredentials))
	token := func() string {
		_, m := e.post("/api/oauth/token", params("grant_type", "client_credentials"), a.ClientID, secret)
		return m["access_token"].(string)
	}
	t1, t2 := token(), token()
	for _, tok := range []string{t1, t2} {
		if st, _ := e.call("GET", "/api/v1/me", tok); st != 200 {
			t.Fatalf("fresh token: %d", st)
		}
		req, _ := http.NewRequest("GET", other.URL+"/api/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if resp, _ := other.DoRequest(req); resp.StatusCode != 200 {
			t.Fatalf("fresh token on the second server: %d", resp.StatusCode)
		}
	}
	for _, tok := range []string{"ss_oauth_unknown", t1} {
		if r, _ := e.post("/api/oauth/revoke", params("token", tok), a.ClientID, secret); r.StatusCode != 200 {
			t.Fatalf("revoke %s: %d", tok, r.StatusCode)
		}
	}
	r, m := e.post("/api/oauth/revoke", params("token", t2), a.ClientID, "wrong")
	wantOAuthError(t, "revoke with a wrong secret", r, m, 401, "invalid_client")
	eventually(t, "revoked token refused by the second server", func() bool {
		req, _ := http.NewRequest("GET", other.URL+"/api/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+t1)
		resp, _ := other.DoRequest(req)
		return resp.StatusCode == 401
	})
	eventually(t, "revoked token refused by the first server", func() bool {
		st, _ := e.call("GET", "/api/v1/me", t1)
		return st == 401
	})
	if st, _ := e.call("GET", "/api/v1/me", t2); st != 200 {
		t.Fatalf("other token after revoking one: %d", st)
	}
	if err := e.store.DeleteApp(context.Background(), ws, a.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "token of a deleted app refused", func() bool {
		st, _ := e.call("GET", "/api/v1/me", t2)
		return st == 401
	})

	resp, err := http.Get(e.h.URL + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md Metadata
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil || resp.StatusCode != 200 || md.Issuer != issuer ||
		md.TokenEndpoint != issuer+"/api/oauth/token" || md.AuthorizationEndpoint != issuer+"/oauth/authorize" ||
		md.RevocationEndpoint != issuer+"/api/oauth/revoke" || len(md.CodeChallengeMethodsSupported) != 1 ||
		md.CodeChallengeMethodsSupported[0] != "S256" || len(md.ScopesSupported) != len(auth.Scopes) {
		t.Fatalf("metadata %d %+v %v", resp.StatusCode, md, err)
	}
	// The served OpenAPI document has the token endpoint and the scheme.
	_, key := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	if st, doc := e.call("GET", "/api/v1/openapi.json", key); st != 200 || !strings.Contains(doc, `"/oauth/token"`) ||
		!strings.Contains(doc, `"/oauth/revoke"`) || !strings.Contains(doc, `"authorizationUrl":"`+e.h.URL+`/oauth/authorize"`) {
		t.Fatalf("openapi: %d, OAuth paths or scheme missing", st)
	}
}
