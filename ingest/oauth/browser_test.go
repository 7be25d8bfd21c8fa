package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"sendstream/ingest/auth"
	chromium "sendstream/ingest/ingesttest/browser"
	"sendstream/ingest/members"
)

// callback is the client's loopback redirect listener (RFC 8252 7.3):
// http://localhost:<port>/callback hands each redirect's query to the
// test.
func callback(t *testing.T) (string, <-chan url.Values) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan url.Values, 4)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		got <- r.URL.Query()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><title>Connected</title><p id=done>You may close this window.</p>")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return fmt.Sprintf("http://localhost:%d/callback", ln.Addr().(*net.TCPAddr).Port), got
}

// endpointFromDiscovery reads RFC 8414 metadata and returns the endpoint
// golang.org/x/oauth2 is configured with, checking what the client relies
// on: the endpoints under the issuer, the code grant with S256, refresh and
// client_credentials, and client_secret_basic (AuthStyleInHeader). The
// issuer is not served here, so its URLs are mapped onto the test server.
func endpointFromDiscovery(t *testing.T, e *env) oauth2.Endpoint {
	t.Helper()
	resp, err := http.Get(e.h.URL + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md Metadata
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil || resp.StatusCode != 200 {
		t.Fatalf("discovery: %d %v", resp.StatusCode, err)
	}
	for _, c := range []struct {
		what string
		ok   bool
	}{
		{"issuer", md.Issuer == issuer},
		{"authorization_endpoint", md.AuthorizationEndpoint == issuer+"/oauth/authorize"},
		{"token_endpoint", md.TokenEndpoint == issuer+"/api/oauth/token"},
		{"revocation_endpoint", md.RevocationEndpoint == issuer+"/api/oauth/revoke"},
		{"response_types_supported [code]", slices.Equal(md.ResponseTypesSupported, []string{"code"})},
		{"code_challenge_methods_supported [S256]", slices.Equal(md.CodeChallengeMethodsSupported, []string{"S256"})},
		{"grant_types_supported", slices.Contains(md.GrantTypesSupported, GrantAuthorizationCode) &&
			slices.Contains(md.GrantTypesSupported, GrantRefreshToken) && slices.Contains(md.GrantTypesSupported, GrantClientCredentials)},
		{"token_endpoint_auth_methods_supported basic, post, none", slices.Contains(md.TokenEndpointAuthMethodsSupported, "client_secret_basic") &&
			slices.Contains(md.TokenEndpointAuthMethodsSupported, "client_secret_post") && slices.Contains(md.TokenEndpointAuthMethodsSupported, "none")},
		{"revocation auth methods", slices.Contains(md.RevocationEndpointAuthMethods, "client_secret_basic")},
		{"scopes_supported", slices.Equal(md.ScopesSupported, auth.Scopes)},
	} {
		if !c.ok {
			t.Errorf("discovery %s: %+v", c.what, md)
		}
	}
	local := func(u string) string { return e.h.URL + strings.TrimPrefix(u, issuer) }
	return oauth2.Endpoint{AuthURL: local(md.AuthorizationEndpoint), TokenURL: local(md.TokenEndpoint), AuthStyle: oauth2.AuthStyleInHeader}
}

// TestBrowserAuthorizationCodeAndClientCredentials is issue 27's check of
// the authorization server with a real client and a real browser:
// golang.org/x/oauth2 builds the authorization URL with PKCE (S256),
// headless Chromium follows it, signs the member in on /login, approves on
// the consent page and is redirected to the client's loopback listener;
// the client exchanges the code with its verifier, calls /api/v1/contacts,
// refreshes through its TokenSource (the refresh token rotates), and the
// client-credentials flow gets a token that calls /api/v1/contacts too.
func TestBrowserAuthorizationCodeAndClientCredentials(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	ws, owner := e.workspace(auth.PlanPro, members.RoleOwner, "")
	cb, redirects := callback(t)
	a, secret := e.app(NewApp{Workspace: ws, Name: "Browser CRM", Type: TypeConfidential,
		Grants: []string{GrantAuthorizationCode, GrantRefreshToken, GrantClientCredentials}, Scopes: []string{auth.ScopeContactsRead},
		RedirectURIs: []string{cb}, CreatedBy: owner})
	endpoint := endpointFromDiscovery(t, e)
	conf := oauth2.Config{ClientID: a.ClientID, ClientSecret: secret, RedirectURL: cb, Scopes: []string{auth.ScopeContactsRead}, Endpoint: endpoint}
	verifier := oauth2.GenerateVerifier()
	state := oauth2.GenerateVerifier()[:16]
	authURL := conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))

	p := chromium.Launch(t).NewPage(t)
	where := func() string {
		t.Helper()
		var loc string
		p.Eval(t, `location.href`, &loc)
		return loc
	}
	p.Navigate(t, authURL)
	if got := where(); !strings.HasPrefix(got, e.h.URL+"/login?next=") {
		t.Fatalf("signed out, the authorization URL landed on %q, want the sign-in page", got)
	}
	p.Eval(t, `document.getElementById("email").value = `+strconv.Quote(e.email(owner))+`;
		document.getElementById("password").value = "correct horse"; true`, nil)
	p.Submit(t, `document.querySelector('form[action="/login"] button[type=submit]').click()`)
	var page struct {
		Path, Text string
	}
	p.Eval(t, `({path: location.pathname, text: document.body.innerText})`, &page)
	if page.Path != "/oauth/authorize" || !strings.Contains(page.Text, "Browser CRM") || !strings.Contains(page.Text, auth.ScopeContactsRead) {
		t.Fatalf("after signing in: %q showing %.300q, want the consent page", page.Path, page.Text)
	}
	p.Submit(t, `document.querySelector('button[name=decision][value=approve]').click()`)
	var back url.Values
	select {
	case back = <-redirects:
	case <-time.After(30 * time.Second):
		t.Fatalf("no redirect reached %s; the browser is on %q", cb, where())
	}
	if got := where(); !strings.HasPrefix(got, cb+"?") {
		t.Fatalf("after approving the browser is on %q, want %s", got, cb)
	}
	if back.Get("state") != state || back.Get("code") == "" || back.Get("error") != "" {
		t.Fatalf("redirect query %v, want code and state %q", back, state)
	}

	tok, err := conf.Exchange(ctx, back.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if !strings.HasPrefix(tok.AccessToken, AccessTokenPrefix) || tok.RefreshToken == "" || tok.Type() != "Bearer" || tok.Extra("scope") != auth.ScopeContactsRead {
		t.Fatalf("token %+v", tok)
	}
	contacts := func(what string, c *http.Client) {
		t.Helper()
		resp, err := c.Get(e.h.URL + "/api/v1/contacts")
		if err != nil {
			t.Fatalf("%s: GET /api/v1/contacts: %v", what, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: GET /api/v1/contacts: %d", what, resp.StatusCode)
		}
	}
	contacts("code grant token", conf.Client(ctx, tok))
	if st, body := e.call("GET", "/api/v1/me", tok.AccessToken); st != 200 || !strings.Contains(body, `"member":{"id":"`+owner+`"}`) {
		t.Fatalf("/api/v1/me of the consented token: %d %s", st, body)
	}

	// The TokenSource refreshes a token past its expiry.
	stale := *tok
	stale.Expiry = time.Now().Add(-time.Minute)
	fresh, err := conf.TokenSource(ctx, &stale).Token()
	if err != nil {
		t.Fatalf("refresh through the TokenSource: %v", err)
	}
	if fresh.AccessToken == tok.AccessToken || fresh.RefreshToken == "" || fresh.RefreshToken == tok.RefreshToken || !fresh.Valid() {
		t.Fatalf("refreshed token %+v, want a new access and refresh token", fresh)
	}
	contacts("refreshed token", oauth2.NewClient(ctx, oauth2.StaticTokenSource(fresh)))

	cc := clientcredentials.Config{ClientID: a.ClientID, ClientSecret: secret, TokenURL: endpoint.TokenURL,
		Scopes: []string{auth.ScopeContactsRead}, AuthStyle: endpoint.AuthStyle}
	ctok, err := cc.Token(ctx)
	if err != nil {
		t.Fatalf("client_credentials: %v", err)
	}
	if ctok.RefreshToken != "" || ctok.AccessToken == fresh.AccessToken {
		t.Fatalf("client_credentials token %+v", ctok)
	}
	contacts("client_credentials token", cc.Client(ctx))

	// The replaced refresh token: refused, and the connection revoked.
	var re *oauth2.RetrieveError
	if _, err := conf.TokenSource(ctx, &stale).Token(); !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("reusing the replaced refresh token: %v, want invalid_grant", err)
	}
	eventually(t, "refreshed token refused after the replaced refresh token came back", func() bool {
		st, _ := e.call("GET", "/api/v1/contacts", fresh.AccessToken)
		return st == 401
	})
	if ex := p.Exceptions(); len(ex) > 0 {
		t.Errorf("uncaught exceptions: %v", ex)
	}
}
