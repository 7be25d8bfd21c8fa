package oauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"sendstream/ingest/auth"
	"sendstream/ingest/members"
)

// TestAppLimitsOverHTTP: spec 5.3 availability through the dashboard's
// POST /api/oauth-apps: a free-plan workspace is refused, the 11th app is
// refused, and a public app cannot have client_credentials.
func TestAppLimitsOverHTTP(t *testing.T) {
	e := start(t)
	_, freeOwner := e.workspace(auth.PlanFree, members.RoleOwner, "")
	fb := e.browser(t)
	fb.signIn(e.email(freeOwner))
	create := func(name string) string {
		return fmt.Sprintf(`{"name":%q,"type":"confidential","grants":["client_credentials"],"scopes":["contacts:read"]}`, name)
	}
	if st, m := fb.api("POST", "/api/oauth-apps", create("free")); st != 403 {
		t.Fatalf("free plan creating an app: %d %v, want 403", st, m)
	}
	ws, owner := e.workspace(auth.PlanPro, members.RoleOwner, "")
	b := e.browser(t)
	b.signIn(e.email(owner))
	if st, m := b.api("POST", "/api/oauth-apps", `{"name":"cli","type":"public","grants":["authorization_code","client_credentials"],"scopes":["contacts:read"],"redirectUris":["http://localhost:9000/cb"]}`); st != 400 {
		t.Fatalf("public app with client_credentials: %d %v, want 400", st, m)
	}
	for i := range MaxAppsPerWorkspace {
		if st, m := b.api("POST", "/api/oauth-apps", create(fmt.Sprint("app ", i+1))); st != 201 {
			t.Fatalf("app %d of %d: %d %v", i+1, MaxAppsPerWorkspace, st, m)
		}
	}
	if st, m := b.api("POST", "/api/oauth-apps", create("eleventh")); st != 409 || m["code"] != "app_limit_reached" {
		t.Fatalf("11th app: %d %v, want 409 app_limit_reached", st, m)
	}
	apps, err := e.store.Apps(context.Background(), ws)
	if err != nil || len(apps) != MaxAppsPerWorkspace {
		t.Fatalf("apps after the refused 11th: %d %v", len(apps), err)
	}
}

// TestCodesShortLived: a code is valid CodeTTL (at most the 10 minutes of
// RFC 6749 4.1.2) from its issue, and one past its expiry is invalid_grant
// at the token endpoint; nothing is issued for it.
func TestCodesShortLived(t *testing.T) {
	if CodeTTL <= 0 || CodeTTL > 10*time.Minute {
		t.Fatalf("CodeTTL %v: RFC 6749 4.1.2 asks for at most 10 minutes", CodeTTL)
	}
	e := start(t)
	ctx := context.Background()
	ws, owner := e.workspace(auth.PlanPro, members.RoleOwner, "")
	a, secret := e.app(confidential(ws, owner, GrantAuthorizationCode))
	const cb = "https://app.example.com/cb"
	before := time.Now()
	code := issueCode(t, e, CodeRequest{ClientID: a.ClientID, Workspace: ws, MemberID: owner, RedirectURI: cb})
	h := sha256.Sum256([]byte(code))
	var exp time.Time
	if err := e.h.PG.QueryRow(ctx, "SELECT expires_at FROM oauth_codes WHERE code_hash = $1", h[:]).Scan(&exp); err != nil {
		t.Fatal(err)
	}
	if exp.Before(before.Add(CodeTTL-5*time.Second)) || exp.After(time.Now().Add(CodeTTL+5*time.Second)) {
		t.Fatalf("code expires at %v, want about %v after %v", exp, CodeTTL, before)
	}
	// The code's lifetime has passed (its expiry moved to a second ago).
	if _, err := e.h.PG.Exec(ctx, "UPDATE oauth_codes SET expires_at = now() - interval '1 second' WHERE code_hash = $1", h[:]); err != nil {
		t.Fatal(err)
	}
	r, m := e.post("/api/oauth/token", params("grant_type", "authorization_code", "code", code, "redirect_uri", cb), a.ClientID, secret)
	wantOAuthError(t, "expired code", r, m, 400, "invalid_grant")
	var conns int
	if err := e.h.PG.QueryRow(ctx, "SELECT count(*) FROM oauth_connections WHERE app_id = $1", a.ID).Scan(&conns); err != nil || conns != 0 {
		t.Fatalf("connections after an expired code: %d %v, want none", conns, err)
	}
}

// TestClientCredentialsRefusedForPublicClients: a public client (no
// secret) asking for client_credentials at the token endpoint is
// unauthorized_client (spec 5.3: confidential only), and so is a
// confidential app without the grant.
func TestClientCredentialsRefusedForPublicClients(t *testing.T) {
	e := start(t)
	ws, owner := e.workspace(auth.PlanPro, members.RoleOwner, "")
	pub, _ := e.app(NewApp{Workspace: ws, Name: "cli", Type: TypePublic, Grants: []string{GrantAuthorizationCode},
		Scopes: []string{auth.ScopeContactsRead}, RedirectURIs: []string{"http://localhost:9000/cb"}, CreatedBy: owner})
	r, m := e.post("/api/oauth/token", params("grant_type", "client_credentials", "client_id", pub.ClientID), "", "")
	wantOAuthError(t, "public client asking for client_credentials", r, m, 400, "unauthorized_client")
	r, m = e.post("/api/oauth/token", params("grant_type", "client_credentials", "client_id", pub.ClientID, "client_secret", "guess"), "", "")
	wantOAuthError(t, "public client sending a secret", r, m, 401, "invalid_client")
	conf, secret := e.app(confidential(ws, owner, GrantAuthorizationCode))
	r, m = e.post("/api/oauth/token", params("grant_type", "client_credentials"), conf.ClientID, secret)
	wantOAuthError(t, "confidential app without the grant", r, m, 400, "unauthorized_client")
}

// TestRevokeRefreshTokenAndOtherClients: RFC 7009: revoking a refresh
// token revokes its connection (the access tokens of the grant stop
// working); a token of another client answers 200 and stays valid; the
// revoking client must authenticate.
func TestRevokeRefreshTokenAndOtherClients(t *testing.T) {
	e := start(t)
	ws, owner := e.workspace(auth.PlanPro, members.RoleOwner, "")
	a, secret := e.app(confidential(ws, owner, GrantAuthorizationCode, GrantRefreshToken))
	b, bSecret := e.app(confidential(ws, owner, GrantClientCredentials))
	grant := codeTokens(t, e, a, secret, ws, owner, "")
	access, refresh := grant["access_token"].(string), grant["refresh_token"].(string)
	_, other := e.post("/api/oauth/token", params("grant_type", "client_credentials"), b.ClientID, bSecret)
	otherTok := other["access_token"].(string)

	if r, m := e.post("/api/oauth/revoke", params("token", otherTok), a.ClientID, secret); r.StatusCode != 200 {
		t.Fatalf("revoking another client's token: %d %v, want 200", r.StatusCode, m)
	}
	if st, _ := e.call("GET", "/api/v1/contacts", otherTok); st != 200 {
		t.Fatalf("another client's token after a foreign revocation: %d, want 200", st)
	}
	r, m := e.post("/api/oauth/revoke", params("token", refresh), "", "")
	wantOAuthError(t, "revocation without client authentication", r, m, 401, "invalid_client")
	if r, m := e.post("/api/oauth/revoke", params("token", refresh, "token_type_hint", "refresh_token"), a.ClientID, secret); r.StatusCode != 200 || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("revoke refresh token: %d %v %v", r.StatusCode, m, r.Header)
	}
	eventually(t, "access token of a revoked refresh token's grant refused", func() bool {
		st, _ := e.call("GET", "/api/v1/contacts", access)
		return st == 401
	})
	r, m = e.post("/api/oauth/token", params("grant_type", "refresh_token", "refresh_token", refresh), a.ClientID, secret)
	wantOAuthError(t, "revoked refresh token", r, m, 400, "invalid_grant")
}

// TestOnlyAPIKeyManagersApprove: a member without api_keys.manage sees a
// refusal on the consent page and cannot approve by posting the form,
// while a custom role holding only that permission approves; the refresh
// token the grant issues is valid 90 days (spec 8.3).
func TestOnlyAPIKeyManagersApprove(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	ws, keys := e.workspace(auth.PlanPro, members.RoleCustom, members.PermAPIKeys)
	const cb = "https://app.example.com/cb"
	a, secret := e.app(confidential(ws, keys, GrantAuthorizationCode, GrantRefreshToken))
	q := params("client_id", a.ClientID, "redirect_uri", cb, "response_type", "code", "state", "s")
	approve := params("client_id", a.ClientID, "redirect_uri", cb, "response_type", "code", "state", "s", "decision", "approve")

	plain := e.browser(t)
	plain.signIn(e.email(e.member(ws, members.RoleMember, "")))
	if resp, html := plain.do("GET", "/oauth/authorize?"+q.Encode(), nil, ""); resp.StatusCode != 403 || strings.Contains(html, "Approve") {
		t.Fatalf("consent page for a member without api_keys.manage: %d", resp.StatusCode)
	}
	if resp, _ := plain.do("POST", "/oauth/authorize", approve, "same-origin"); resp.StatusCode != 403 || resp.Header.Get("Location") != "" {
		t.Fatalf("approval by a member without api_keys.manage: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	ok := e.browser(t)
	ok.signIn(e.email(keys))
	resp, _ := ok.do("POST", "/oauth/authorize", approve, "same-origin")
	back, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != 303 || err != nil || back.Query().Get("code") == "" {
		t.Fatalf("approval by a custom role with api_keys.manage: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	before := time.Now()
	r, m := e.post("/api/oauth/token", params("grant_type", "authorization_code", "code", back.Query().Get("code"), "redirect_uri", cb), a.ClientID, secret)
	if r.StatusCode != 200 || m["expires_in"] != 3600.0 || m["refresh_token"] == nil {
		t.Fatalf("exchange: %d %v", r.StatusCode, m)
	}
	h := sha256.Sum256([]byte(m["refresh_token"].(string)))
	var exp time.Time
	if err := e.h.PG.QueryRow(ctx, "SELECT expires_at FROM oauth_tokens WHERE token_hash = $1 AND kind = 'refresh'", h[:]).Scan(&exp); err != nil {
		t.Fatal(err)
	}
	if want := before.Add(90 * 24 * time.Hour); exp.Before(want.Add(-time.Minute)) || exp.After(want.Add(time.Minute)) {
		t.Fatalf("refresh token expires at %v, want 90 days after %v", exp, before)
	}
}
