package dashboard_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"sendstream/ingest/members"
)

// invite invites email with role on the members page as cookie's member
// and returns the token of the link shown.
func (e *env) invite(cookie, email, role string) string {
	e.t.Helper()
	resp, body := e.do("POST", "/settings/members", cookie, inviteForm(email, role), nil)
	m := inviteLinkRe.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil {
		e.t.Fatalf("invite %s: %d\n%s", email, resp.StatusCode, body)
	}
	link, err := url.Parse(m[1])
	if err != nil {
		e.t.Fatal(err)
	}
	return link.Query().Get("token")
}

// pendingID returns the id of email's pending invitation of ws ("" when
// none) and how many are pending for it.
func (e *env) pendingID(ws, email string) (string, int) {
	e.t.Helper()
	_, invs := e.listed(ws)
	id, n := "", 0
	for _, inv := range invs {
		if inv.Email == email {
			id, n = inv.ID, n+1
		}
	}
	return id, n
}

// linkWorks reports whether GET /invitation with token answers 200; any
// other answer than 200 or 400 fails the test.
func (e *env) linkWorks(token string) bool {
	e.t.Helper()
	resp, _ := e.do("GET", "/invitation?token="+url.QueryEscape(token), "", nil, nil)
	if resp.StatusCode != 200 && resp.StatusCode != 400 {
		e.t.Fatalf("GET /invitation: %d", resp.StatusCode)
	}
	return resp.StatusCode == 200
}

// TestInvitationRevoked: a pending invitation is revoked from the members
// page (303 back) or DELETE /api/invitations/{id}; its link then answers
// 400 on /invitation, GET and POST; revoking again is 404.
func TestInvitationRevoked(t *testing.T) {
	e := start(t)
	ws, _, owner := e.member("", "owner", "")
	first := "first." + strings.ToLower(ws) + "@example.com"
	token := e.invite(owner, first, "member")
	id, _ := e.pendingID(ws, first)
	if id == "" || !e.linkWorks(token) {
		t.Fatalf("invitation %q pending, link works %v", id, e.linkWorks(token))
	}
	resp, body := e.do("GET", "/settings/members", owner, nil, nil)
	if !strings.Contains(body, `action="/settings/members/invitations/`+id+`/revoke"`) {
		t.Fatalf("no Revoke button for %s: %d\n%s", id, resp.StatusCode, body)
	}
	// Cross-origin: refused, nothing revoked.
	resp, _ = e.do("POST", "/settings/members/invitations/"+id+"/revoke", owner, url.Values{}, map[string]string{"Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != 403 || !e.linkWorks(token) {
		t.Fatalf("cross-origin revoke: %d, link works %v", resp.StatusCode, e.linkWorks(token))
	}
	resp, _ = e.do("POST", "/settings/members/invitations/"+id+"/revoke", owner, url.Values{}, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/settings/members" {
		t.Fatalf("revoke: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if left, _ := e.pendingID(ws, first); left != "" || e.linkWorks(token) {
		t.Fatalf("after revoking: pending %q, link works %v", left, e.linkWorks(token))
	}
	resp, body = e.do("POST", "/invitation", "", url.Values{"token": {token}, "password": {"invitee password"}}, nil)
	if resp.StatusCode != 400 || !strings.Contains(body, "revoked") || e.memberID(ws, first) != "" {
		t.Fatalf("accepting a revoked invitation: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := e.do("POST", "/settings/members/invitations/"+id+"/revoke", owner, url.Values{}, nil); resp.StatusCode != 404 {
		t.Fatalf("revoking twice: %d", resp.StatusCode)
	}

	// The JSON route.
	second := "second." + strings.ToLower(ws) + "@example.com"
	st, body := e.jsonCall("POST", "/api/invitations", owner, map[string]any{"email": second, "role": "member"})
	var inv members.Invitation
	if st != 201 || json.Unmarshal([]byte(body), &inv) != nil || inv.Emailed || inv.NotEmailed == "" {
		t.Fatalf("POST /api/invitations (no mail configured): %d %s", st, body)
	}
	if st, body := e.jsonCall("DELETE", "/api/invitations/"+inv.ID, owner, nil); st != 200 || !strings.Contains(body, `"revoked":true`) {
		t.Fatalf("DELETE /api/invitations: %d %s", st, body)
	}
	if e.linkWorks(inv.Token) {
		t.Fatal("the link of an invitation revoked through the API works")
	}
	if st, _ := e.jsonCall("DELETE", "/api/invitations/"+inv.ID, owner, nil); st != 404 {
		t.Fatalf("DELETE twice: %d", st)
	}
	// Another workspace's invitation is not found.
	_, _, stranger := e.member("", "owner", "")
	token = e.invite(owner, first, "member")
	id, _ = e.pendingID(ws, first)
	if st, _ := e.jsonCall("DELETE", "/api/invitations/"+id, stranger, nil); st != 404 || !e.linkWorks(token) {
		t.Fatalf("another workspace's owner revokes: %d", st)
	}
}

// TestInvitationRevokePermissions: support staff and members without
// members.manage are refused (403) on the page and the API, and an admin
// may not revoke an invitation to the owner role; nothing is revoked.
func TestInvitationRevokePermissions(t *testing.T) {
	e := start(t)
	ws, _, owner := e.member("", "owner", "")
	_, _, admin := e.member(ws, "admin", "")
	_, _, support := e.member(ws, "support", "")
	_, _, member := e.member(ws, "member", "api_keys.manage,webhooks.manage")
	_, _, custom := e.member(ws, "custom", "api_keys.manage")
	_, _, manager := e.member(ws, "custom", "members.manage")
	pending := "pending." + strings.ToLower(ws) + "@example.com"
	token := e.invite(owner, pending, "member")
	id, _ := e.pendingID(ws, pending)
	for name, cookie := range map[string]string{"support": support, "member": member, "custom": custom} {
		resp, body := e.do("GET", "/settings/members", cookie, nil, nil)
		if resp.StatusCode != 200 || strings.Contains(body, "/revoke") {
			t.Errorf("%s sees a Revoke button (%d)", name, resp.StatusCode)
		}
		if resp, _ := e.do("POST", "/settings/members/invitations/"+id+"/revoke", cookie, url.Values{}, nil); resp.StatusCode != 403 {
			t.Errorf("%s revokes on the page: %d", name, resp.StatusCode)
		}
		if st, _ := e.jsonCall("DELETE", "/api/invitations/"+id, cookie, nil); st != 403 {
			t.Errorf("%s revokes through the API: %d", name, st)
		}
	}
	if !e.linkWorks(token) {
		t.Fatal("a refused revoke revoked the invitation")
	}
	// An owner invitation: not the admin's to revoke.
	future := "future-owner." + strings.ToLower(ws) + "@example.com"
	ownerToken := e.invite(owner, future, "owner")
	ownerInv, _ := e.pendingID(ws, future)
	if resp, body := e.do("POST", "/settings/members/invitations/"+ownerInv+"/revoke", admin, url.Values{}, nil); resp.StatusCode != 403 || !strings.Contains(body, "Only an owner may revoke") {
		t.Fatalf("admin revokes an owner invitation: %d", resp.StatusCode)
	}
	if st, _ := e.jsonCall("DELETE", "/api/invitations/"+ownerInv, admin, nil); st != 403 || !e.linkWorks(ownerToken) {
		t.Fatalf("admin revokes an owner invitation through the API: %d", st)
	}
	// A custom role with members.manage may revoke a member invitation.
	if resp, _ := e.do("POST", "/settings/members/invitations/"+id+"/revoke", manager, url.Values{}, nil); resp.StatusCode != 303 || e.linkWorks(token) {
		t.Fatalf("members.manage revokes: %d", resp.StatusCode)
	}
}

// TestInviteRefusesMembersAndReplacesPending: inviting an address that is
// already a member of the workspace is refused at once (400, page and
// API, nothing stored); inviting an address with a pending invitation
// replaces it: one pending invitation, the old link answers 400, the new
// one works.
func TestInviteRefusesMembersAndReplacesPending(t *testing.T) {
	e := start(t)
	ws, ownerEmail, owner := e.member("", "owner", "")
	_, memberEmail, _ := e.member(ws, "member", "")
	for _, addr := range []string{memberEmail, strings.ToUpper(ownerEmail)} {
		resp, body := e.do("POST", "/settings/members", owner, inviteForm(addr, "admin"), nil)
		if resp.StatusCode != 400 || !strings.Contains(body, "is already a member of this workspace") || inviteLinkRe.MatchString(body) {
			t.Fatalf("inviting member %s on the page: %d\n%s", addr, resp.StatusCode, body)
		}
		st, body := e.jsonCall("POST", "/api/invitations", owner, map[string]any{"email": addr, "role": "admin"})
		if st != 400 || !strings.Contains(body, "already a member") {
			t.Fatalf("inviting member %s through the API: %d %s", addr, st, body)
		}
	}
	if _, invs := e.listed(ws); len(invs) != 0 {
		t.Fatalf("refused invitations were stored: %+v", invs)
	}
	// A member of another workspace may be invited.
	_, outsider, _ := e.member("", "owner", "")
	e.invite(owner, outsider, "member")

	again := "again." + strings.ToLower(ws) + "@example.com"
	oldToken := e.invite(owner, again, "member")
	newToken := e.invite(owner, again, "admin")
	id, n := e.pendingID(ws, again)
	if n != 1 || e.linkWorks(oldToken) || !e.linkWorks(newToken) {
		t.Fatalf("after inviting twice: %d pending (%s), old link works %v, new %v", n, id, e.linkWorks(oldToken), e.linkWorks(newToken))
	}
	_, invs := e.listed(ws)
	for _, inv := range invs {
		if inv.ID == id && inv.Role != "admin" {
			t.Fatalf("the pending invitation has role %s, want the second's (admin)", inv.Role)
		}
	}
}
