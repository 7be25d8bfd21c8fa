package oauth

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"sendstream/ingest/auth"
	"sendstream/ingest/members"
)

// browser is a same-origin browser without redirects followed.
type browser struct {
	t      *testing.T
	e      *env
	cookie string
	c      *http.Client
}

func (e *env) browser(t *testing.T) *browser {
	return &browser{t: t, e: e, c: &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, target string, form url.Values, site string) (*http.Response, string) {
	b.t.Helper()
	if !strings.HasPrefix(target, "http") {
		target = b.e.h.URL + target
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, target, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if site != "" {
		req.Header.Set("Sec-Fetch-Site", site)
	}
	if b.cookie != "" {
		req.AddCookie(&http.Cookie{Name: "ss_session", Value: b.cookie})
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	for _, ck := range resp.Cookies() {
		if ck.Name == "ss_session" {
			b.cookie = ck.Value
		}
	}
	return resp, string(out)
}

func (b *browser) signIn(email string) {
	b.t.Helper()
	if resp, body := b.do("POST", "/login", url.Values{"email": {email}, "password": {"correct horse"}}, "same-origin"); resp.StatusCode != 303 {
		b.t.Fatalf("sign in: %d %.300s", resp.StatusCode, body)
	}
}

// TestConsentPage: golang.org/x/oauth2 drives the authorization-code flow
// with PKCE through the consent page (signed in over HTTP with a session
// cookie), then calls /api/v1/contacts; the page's refusals.
func TestConsentPage(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	ws, approver := e.workspace(auth.PlanPro, members.RoleOwner, "")
	const cb = "http://localhost:8765/callback"
	a, _ := e.app(NewApp{Workspace: ws, Name: "Zapier-like", Type: TypePublic, Grants: []string{GrantAuthorizationCode, GrantRefreshToken},
		Scopes: []string{auth.ScopeContactsRead}, RedirectURIs: []string{cb}})
	conf := oauth2.Config{ClientID: a.ClientID, RedirectURL: cb, Scopes: []string{auth.ScopeContactsRead},
		Endpoint: oauth2.Endpoint{AuthURL: e.h.URL + "/oauth/authorize", TokenURL: e.h.URL + "/api/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL("st4te", oauth2.S256ChallengeOption(verifier))

	b := e.browser(t)
	resp, _ := b.do("GET", authURL, nil, "")
	loc := resp.Header.Get("Location")
	if resp.StatusCode != 303 || !strings.HasPrefix(loc, "/login?next=") {
		t.Fatalf("signed out: %d %q, want 303 to /login", resp.StatusCode, loc)
	}
	b.signIn(e.email(approver))
	next, _ := url.Parse(loc)
	resp, html := b.do("GET", next.Query().Get("next"), nil, "")
	if resp.StatusCode != 200 || !strings.Contains(html, "Zapier-like") || !strings.Contains(html, "contacts:read") ||
		resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("consent page: %d %v %.400s", resp.StatusCode, resp.Header, html)
	}
	approve := url.Values{"client_id": {a.ClientID}, "redirect_uri": {cb}, "response_type": {"code"}, "scope": {"contacts:read"},
		"state": {"st4te"}, "code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}, "decision": {"approve"}}
	if resp, _ := b.do("POST", "/oauth/authorize", approve, "cross-site"); resp.StatusCode != 403 || resp.Header.Get("Location") != "" {
		t.Fatalf("cross-site approval: %d %q, want 403", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = b.do("POST", "/oauth/authorize", approve, "same-origin")
	back, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != 303 || err != nil || !strings.HasPrefix(back.String(), cb+"?") || back.Query().Get("state") != "st4te" || back.Query().Get("code") == "" {
		t.Fatalf("approve: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	tok, err := conf.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	r, err := conf.Client(ctx, tok).Get(e.h.URL + "/api/v1/contacts")
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("GET /api/v1/contacts with the consented token: %v %v", r, err)
	}
	r.Body.Close()

	deny := url.Values{}
	for k, v := range approve {
		deny[k] = v
	}
	deny.Set("decision", "deny")
	resp, _ = b.do("POST", "/oauth/authorize", deny, "same-origin")
	if back, _ := url.Parse(resp.Header.Get("Location")); resp.StatusCode != 303 || back.Query().Get("error") != "access_denied" || back.Query().Get("state") != "st4te" {
		t.Fatalf("deny: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Errors go back to a verified redirect URI, and only to one.
	q := func(mod func(url.Values)) string {
		v := url.Values{"client_id": {a.ClientID}, "redirect_uri": {cb}, "response_type": {"code"}, "state": {"s"},
			"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}}
		mod(v)
		return "/oauth/authorize?" + v.Encode()
	}
	for name, c := range map[string]struct {
		mod   func(url.Values)
		error string
	}{
		"public app without code_challenge": {func(v url.Values) { v.Del("code_challenge"); v.Del("code_challenge_method") }, "invalid_request"},
		"plain PKCE":                        {func(v url.Values) { v.Set("code_challenge_method", "plain") }, "invalid_request"},
		"response_type token":               {func(v url.Values) { v.Set("response_type", "token") }, "unsupported_response_type"},
		"scope beyond the app's":            {func(v url.Values) { v.Set("scope", "events:write") }, "invalid_scope"},
	} {
		resp, _ := b.do("GET", q(c.mod), nil, "")
		back, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != 303 || !strings.HasPrefix(back.String(), cb+"?") || back.Query().Get("error") != c.error || back.Query().Get("state") != "s" {
			t.Errorf("%s: %d %q, want a redirect with error %s", name, resp.StatusCode, resp.Header.Get("Location"), c.error)
		}
	}
	for name, mod := range map[string]func(url.Values){
		"redirect URI one character off": func(v url.Values) { v.Set("redirect_uri", cb+"x") },
		"unknown client":                 func(v url.Values) { v.Set("client_id", "ss_client_nope") },
	} {
		if resp, html := b.do("GET", q(mod), nil, ""); resp.StatusCode != 400 || resp.Header.Get("Location") != "" || !strings.Contains(html, "Cannot connect") {
			t.Errorf("%s: %d %q, want the error page and no redirect", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	// Support staff see the refusal and cannot approve.
	support := e.browser(t)
	support.signIn(e.email(e.member(ws, members.RoleSupport, "")))
	if resp, html := support.do("GET", q(func(url.Values) {}), nil, ""); resp.StatusCode != 403 || strings.Contains(html, "Approve") {
		t.Fatalf("support staff consent page: %d", resp.StatusCode)
	}
	if resp, _ := support.do("POST", "/oauth/authorize", approve, "same-origin"); resp.StatusCode != 403 || resp.Header.Get("Location") != "" {
		t.Fatalf("support staff approving: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}
