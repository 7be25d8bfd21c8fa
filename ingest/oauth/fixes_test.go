package oauth

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"sendstream/ingest/auth"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/members"
)

// codeTokens runs the authorization-code grant for member with scope and
// returns the token answer.
func codeTokens(t *testing.T, e *env, a App, secret, ws, member, scope string) map[string]any {
	t.Helper()
	const cb = "https://app.example.com/cb"
	code := issueCode(t, e, CodeRequest{ClientID: a.ClientID, Workspace: ws, MemberID: member, Scope: scope, RedirectURI: cb})
	r, m := e.post("/api/oauth/token", params("grant_type", "authorization_code", "code", code, "redirect_uri", cb), a.ClientID, secret)
	if r.StatusCode != 200 {
		t.Fatalf("code exchange: %d %v", r.StatusCode, m)
	}
	return m
}

// TestRemovingAMemberRevokesTheirTokens: DELETE /api/members/{id} removes
// the member's OAuth connections (the tokens they approved and those of a
// client_credentials app acting as them, its creator); both servers, which
// cached the tokens for their 5 s TTL, refuse them within 2 s, so only the
// notification can explain it. Who may remove whom.
func TestRemovingAMemberRevokesTheirTokens(t *testing.T) {
	e := start(t)
	other := e.h.Second(t, ingesttest.Options{Sessions: e.members})
	listen(t, other)
	ws, owner := e.workspace(auth.PlanPro, members.RoleOwner, "")
	leaving := e.member(ws, members.RoleCustom, members.PermAPIKeys)
	a, secret := e.app(confidential(ws, leaving, GrantAuthorizationCode, GrantRefreshToken, GrantClientCredentials))
	approved := codeTokens(t, e, a, secret, ws, leaving, "")
	_, cc := e.post("/api/oauth/token", params("grant_type", "client_credentials"), a.ClientID, secret)
	ownerTok := codeTokens(t, e, a, secret, ws, owner, "")
	tokens := map[string]string{"approved by the member": approved["access_token"].(string), "client_credentials of their app": cc["access_token"].(string)}

	onSecond := func(tok string) int {
		req, _ := http.NewRequest("GET", other.URL+"/api/v1/contacts", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, _ := other.DoRequest(req)
		return resp.StatusCode
	}
	for name, tok := range tokens {
		if st, _ := e.call("GET", "/api/v1/contacts", tok); st != 200 || onSecond(tok) != 200 {
			t.Fatalf("%s before the removal: %d", name, st)
		}
	}

	ownerB := e.browser(t)
	ownerB.signIn(e.email(owner))
	for name, b := range map[string]string{"support staff": e.member(ws, members.RoleSupport, ""), "member without members.manage": e.member(ws, members.RoleMember, "")} {
		br := e.browser(t)
		br.signIn(e.email(b))
		if st, m := br.api("DELETE", "/api/members/"+leaving, ""); st != 403 {
			t.Fatalf("%s removing a member: %d %v", name, st, m)
		}
	}
	if st, m := ownerB.api("DELETE", "/api/members/"+owner, ""); st != 400 {
		t.Fatalf("removing the last owner: %d %v", st, m)
	}
	if st, m := ownerB.api("DELETE", "/api/members/"+leaving, ""); st != 200 {
		t.Fatalf("remove member: %d %v", st, m)
	}
	if st, _ := ownerB.api("DELETE", "/api/members/"+leaving, ""); st != 404 {
		t.Fatalf("remove again: %d, want 404", st)
	}
	for name, tok := range tokens {
		eventually(t, name+" refused on the first server", func() bool { st, _ := e.call("GET", "/api/v1/contacts", tok); return st == 401 })
		eventually(t, name+" refused on the second server", func() bool { return onSecond(tok) == 401 })
	}
	r, m := e.post("/api/oauth/token", params("grant_type", "refresh_token", "refresh_token", approved["refresh_token"].(string)), a.ClientID, secret)
	wantOAuthError(t, "refresh token of a removed member", r, m, 400, "invalid_grant")
	if st, _ := e.call("GET", "/api/v1/contacts", ownerTok["access_token"].(string)); st != 200 {
		t.Fatalf("another member's token after the removal: %d", st)
	}
}

// TestSuspendedWorkspaceGetsNoToken: no grant issues a token while the
// workspace is suspended (invalid_grant, RFC 6749 5.2); the code and the
// refresh token are neither used nor rotated, so both work once resumed.
func TestSuspendedWorkspaceGetsNoToken(t *testing.T) {
	e := start(t)
	ws, owner := e.workspace(auth.PlanPro, members.RoleOwner, "")
	a, secret := e.app(confidential(ws, owner, GrantAuthorizationCode, GrantRefreshToken, GrantClientCredentials))
	const cb = "https://app.example.com/cb"
	refresh := codeTokens(t, e, a, secret, ws, owner, "")["refresh_token"].(string)
	code := issueCode(t, e, CodeRequest{ClientID: a.ClientID, Workspace: ws, MemberID: owner, RedirectURI: cb})
	suspend := func(on bool) {
		t.Helper()
		if _, err := e.h.PG.Exec(context.Background(), "UPDATE workspaces SET suspended = $2 WHERE id = $1", ws, on); err != nil {
			t.Fatal(err)
		}
	}
	grants := map[string][]string{
		"client_credentials": {"grant_type", "client_credentials"},
		"authorization_code": {"grant_type", "authorization_code", "code", code, "redirect_uri", cb},
		"refresh_token":      {"grant_type", "refresh_token", "refresh_token", refresh},
	}
	suspend(true)
	for name, p := range grants {
		r, m := e.post("/api/oauth/token", params(p...), a.ClientID, secret)
		wantOAuthError(t, name+" while suspended", r, m, 400, "invalid_grant")
	}
	suspend(false)
	for name, p := range grants {
		if r, m := e.post("/api/oauth/token", params(p...), a.ClientID, secret); r.StatusCode != 200 {
			t.Fatalf("%s after resuming: %d %v", name, r.StatusCode, m)
		}
	}
}

// TestRefreshNarrowsScope: RFC 6749 section 6: a refresh asking for fewer
// scopes gets an access token with only those (the API refuses the
// others); the new refresh token keeps the grant's scopes; a scope beyond
// the grant's is invalid_scope and rotates nothing.
func TestRefreshNarrowsScope(t *testing.T) {
	e := start(t)
	ws, owner := e.workspace(auth.PlanPro, members.RoleOwner, "")
	n := confidential(ws, owner, GrantAuthorizationCode, GrantRefreshToken)
	n.Scopes = []string{auth.ScopeContactsRead, auth.ScopeContactsWrite, auth.ScopeEventsWrite}
	a, secret := e.app(n)
	grant := codeTokens(t, e, a, secret, ws, owner, "contacts:read contacts:write")
	refresh := func(rt, scope string) (*http.Response, map[string]any) {
		p := params("grant_type", "refresh_token", "refresh_token", rt)
		if scope != "" {
			p.Set("scope", scope)
		}
		return e.post("/api/oauth/token", p, a.ClientID, secret)
	}
	for _, wider := range []string{"contacts:read events:write", "events:write"} {
		r, m := refresh(grant["refresh_token"].(string), wider)
		wantOAuthError(t, "refresh asking for "+wider, r, m, 400, "invalid_scope")
	}
	r, m := refresh(grant["refresh_token"].(string), "contacts:read")
	if r.StatusCode != 200 || m["scope"] != "contacts:read" {
		t.Fatalf("narrowed refresh (after the refused wider ones, the refresh token still works): %d %v", r.StatusCode, m)
	}
	narrow := m["access_token"].(string)
	if st, _ := e.call("GET", "/api/v1/contacts", narrow); st != 200 {
		t.Fatalf("narrowed token reading contacts: %d", st)
	}
	if st, body := e.call("POST", "/api/v1/contacts", narrow); st != 403 {
		t.Fatalf("narrowed token writing contacts: %d %s, want 403", st, body)
	}
	if st, body := e.call("GET", "/api/v1/me", narrow); st != 200 || !strings.Contains(body, `"scopes":["contacts:read"]`) {
		t.Fatalf("/api/v1/me of the narrowed token: %d %s", st, body)
	}
	r, m = refresh(m["refresh_token"].(string), "")
	if r.StatusCode != 200 || m["scope"] != "contacts:read contacts:write" {
		t.Fatalf("refresh without scope after a narrowed one: %d %v, want the grant's scopes", r.StatusCode, m)
	}
	if st, body := e.call("POST", "/api/v1/contacts", m["access_token"].(string)); st != 201 && st != 200 {
		t.Fatalf("full token writing contacts: %d %s", st, body)
	}
}
