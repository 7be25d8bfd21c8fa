package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"sendstream/ingest/auth"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/members"
)

var (
	inviteLinkRe = regexp.MustCompile(`<code id="invitation-link">([^<]+)</code>`)
	memberRowRe  = regexp.MustCompile(`data-member-id="([^"]+)"`)
)

// inviteForm is the members page's invite form.
func inviteForm(email, role string, perms ...string) url.Values {
	return url.Values{"email": {email}, "role": {role}, "permission": perms}
}

// listed returns the workspace's members and open invitations from the store.
func (e *env) listed(ws string) ([]members.Listed, []members.Pending) {
	e.t.Helper()
	ms, err := e.members.ListMembers(context.Background(), ws)
	if err != nil {
		e.t.Fatal(err)
	}
	invs, err := e.members.ListInvitations(context.Background(), ws, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return ms, invs
}

// memberID returns the id of email's membership of ws ("" when none).
func (e *env) memberID(ws, email string) string {
	e.t.Helper()
	ms, _ := e.listed(ws)
	for _, m := range ms {
		if m.Email == email {
			return m.ID
		}
	}
	return ""
}

// sessionCookie returns the ss_session cookie a sign-in answer set.
func sessionCookie(t *testing.T, cks []*http.Cookie) string {
	t.Helper()
	for _, ck := range cks {
		if ck.Name == "ss_session" && ck.Value != "" {
			return ck.Name + "=" + ck.Value
		}
	}
	return ""
}

// workspaceShown is the workspace name the page's header shows beside
// email ("" when it does not).
func workspaceShown(body, email string) string {
	_, rest, ok := strings.Cut(body, email+" · ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "<")
	return name
}

// TestMemberInvitedAcceptsAndSignsIn: an owner invites a custom role with
// named permissions; the link is shown once; the invitation is listed
// until the invitee accepts it on /invitation, then the invitee is a
// member, signs in on /login and sees the workspace.
func TestMemberInvitedAcceptsAndSignsIn(t *testing.T) {
	e := start(t)
	ws, ownerEmail, owner := e.member("", "owner", "")
	resp, body := e.do("GET", "/settings/members", owner, nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, ownerEmail+` <span class="muted">(you)</span>`) || !strings.Contains(body, `action="/settings/members"`) {
		t.Fatalf("members page of the owner: %d\n%s", resp.StatusCode, body)
	}
	if !strings.Contains(body, `<a href="/settings/members">Members</a>`) {
		t.Error("the navigation lacks the Members link")
	}

	invitee := "Invitee." + strings.ToLower(ws) + "@Example.com"
	resp, body = e.do("POST", "/settings/members", owner, inviteForm(invitee, "custom", "api_keys.manage", "webhooks.manage"), nil)
	m := inviteLinkRe.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("invite: %d, link shown: %v\n%s", resp.StatusCode, m != nil, body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the page showing the link has Cache-Control %q, want no-store", cc)
	}
	if !strings.Contains(body, "No email was sent: invitation emails are not configured on this server") {
		t.Error("the answer does not say why the invitation was not emailed")
	}
	link, err := url.Parse(m[1])
	if err != nil || link.Path != "/invitation" || link.Query().Get("token") == "" {
		t.Fatalf("invitation link %q", m[1])
	}
	token := link.Query().Get("token")
	lower := strings.ToLower(invitee)
	_, invs := e.listed(ws)
	if len(invs) != 1 || invs[0].Email != lower || invs[0].Role != "custom" || strings.Join(invs[0].Permissions, ",") != "api_keys.manage,webhooks.manage" {
		t.Fatalf("stored invitations: %+v", invs)
	}
	resp, body = e.do("GET", "/settings/members", owner, nil, nil)
	if resp.StatusCode != 200 || strings.Contains(body, token) {
		t.Fatalf("GET after inviting: %d, the link is in the page again: %v", resp.StatusCode, strings.Contains(body, token))
	}
	for _, want := range []string{`data-invitation-id="` + invs[0].ID + `"`, lower, "<code>api_keys.manage</code>, <code>webhooks.manage</code>", invs[0].ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")} {
		if !strings.Contains(body, want) {
			t.Errorf("the pending invitations lack %q", want)
		}
	}

	// The invitee opens the link on this site and sets a password.
	if resp, body := e.do("GET", "/invitation?token="+url.QueryEscape(token), "", nil, nil); resp.StatusCode != 200 || !strings.Contains(body, token) {
		t.Fatalf("GET /invitation: %d", resp.StatusCode)
	}
	resp, _ = e.do("POST", "/invitation", "", url.Values{"token": {token}, "password": {"invitee password"}}, nil)
	if resp.StatusCode != 303 || sessionCookie(t, resp.Cookies()) == "" {
		t.Fatalf("accepting: %d without a session", resp.StatusCode)
	}
	// Signing in afterwards lands in the workspace.
	resp, _ = e.do("POST", "/login", "", url.Values{"email": {invitee}, "password": {"invitee password"}, "next": {"/settings/members"}}, nil)
	cookie := sessionCookie(t, resp.Cookies())
	if resp.StatusCode != 303 || cookie == "" || resp.Header.Get("Location") != "/settings/members" {
		t.Fatalf("sign-in of the invitee: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body = e.do("GET", "/settings/members", cookie, nil, nil)
	id := e.memberID(ws, lower)
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("the invitee's members page: %d, member id %q", resp.StatusCode, id)
	}
	_, ownerPage := e.do("GET", "/settings/members", owner, nil, nil)
	wsName := workspaceShown(body, lower)
	if wsName == "" || wsName != workspaceShown(ownerPage, ownerEmail) || !strings.Contains(body, `data-member-id="`+id+`"`) || !strings.Contains(body, lower+` <span class="muted">(you)</span>`) || !strings.Contains(body, ownerEmail) {
		t.Errorf("the invitee does not see the owner's workspace's members as themself (workspace %q)", wsName)
	}
	if strings.Contains(body, `data-invitation-id=`) || strings.Contains(body, `action="/settings/members`) {
		t.Error("after accepting: the invitation is still pending, or a custom role without members.manage sees forms")
	}
	if resp, _ := e.do("GET", "/settings/api-keys", cookie, nil, nil); resp.StatusCode != 200 {
		t.Errorf("the invitee's api_keys.manage: keys page %d, want 200", resp.StatusCode)
	}
	// The link works once.
	if resp, _ := e.do("POST", "/invitation", "", url.Values{"token": {token}, "password": {"invitee password"}}, nil); resp.StatusCode != 400 {
		t.Errorf("accepting again: %d, want 400", resp.StatusCode)
	}
}

// TestRemovedMemberSignedOutAtOnce: removing a member ends their session
// (their next page load goes to /login); removing again is 404; the last
// owner cannot be removed.
func TestRemovedMemberSignedOutAtOnce(t *testing.T) {
	e := start(t)
	ws, ownerEmail, owner := e.member("", "owner", "")
	_, email, cookie := e.member(ws, "admin", "")
	if resp, _ := e.do("GET", "/settings/members", cookie, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("the admin's page before removal: %d", resp.StatusCode)
	}
	id := e.memberID(ws, email)
	resp, _ := e.do("POST", "/settings/members/"+id+"/remove", owner, url.Values{}, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/settings/members" {
		t.Fatalf("remove: %d %q, want 303 /settings/members", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, path := range []string{"/settings/members", "/settings/api-keys"} {
		resp, _ := e.do("GET", path, cookie, nil, nil)
		if resp.StatusCode != 303 || resp.Header.Get("Location") != "/login?next="+url.QueryEscape(path) {
			t.Errorf("the removed member's GET %s: %d %q, want 303 to /login", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp, _ := e.do("POST", "/login", "", url.Values{"email": {email}, "password": {"correct horse"}}, nil); resp.StatusCode != 401 {
		t.Errorf("the removed member signing in again: %d, want 401 (no membership left)", resp.StatusCode)
	}
	_, body := e.do("GET", "/settings/members", owner, nil, nil)
	if strings.Contains(body, email) {
		t.Error("the removed member is still listed")
	}
	if resp, body := e.do("POST", "/settings/members/"+id+"/remove", owner, url.Values{}, nil); resp.StatusCode != 404 || !strings.Contains(body, "No such member") {
		t.Errorf("removing again: %d, want 404 saying so", resp.StatusCode)
	}
	// The only owner removing themself.
	ownerID := e.memberID(ws, ownerEmail)
	resp, body = e.do("POST", "/settings/members/"+ownerID+"/remove", owner, url.Values{}, nil)
	if resp.StatusCode != 400 || !strings.Contains(body, "last owner cannot be removed") {
		t.Errorf("removing the last owner: %d, want 400 saying why\n%s", resp.StatusCode, body)
	}
	if e.memberID(ws, ownerEmail) == "" {
		t.Fatal("the last owner was removed")
	}
	if resp, _ := e.do("GET", "/settings/members", owner, nil, nil); resp.StatusCode != 200 {
		t.Errorf("the owner after the refused removal: %d, want 200", resp.StatusCode)
	}
}

// TestRemovedMemberOAuthTokensRefusedAtOnce: an app's client_credentials
// token acting as a member stops working when the member is removed on
// the page (the connections go with the member; the NOTIFY evicts the
// cached token; the cache TTL is a minute).
func TestRemovedMemberOAuthTokensRefusedAtOnce(t *testing.T) {
	p := startPages(t)
	ws, _ := p.h.NewWorkspace(t, ingesttest.WorkspaceOpts{Plan: auth.PlanPro})
	_, _, owner := p.member(ws, "owner", "")
	_, email, dev := p.member(ws, "member", "api_keys.manage")
	_, body := p.do("POST", "/settings/oauth-apps", dev, ccForm("dev bot"), nil)
	m := newSecretRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("create app: no secret\n%s", body)
	}
	st, tok := p.token(p.apps(ws)[0].ClientID, m[1])
	if st != 200 || p.api(tok) != 200 {
		t.Fatalf("client_credentials token: %d, API with it %d", st, p.api(tok))
	}
	resp, _ := p.do("POST", "/settings/members/"+p.memberID(ws, email)+"/remove", owner, url.Values{}, nil)
	if resp.StatusCode != 303 {
		t.Fatalf("remove: %d", resp.StatusCode)
	}
	if !p.refused(tok) {
		t.Fatal("the removed member's app token is not refused within 10 s")
	}
	if resp, _ := p.do("GET", "/settings/oauth-apps", dev, nil, nil); resp.StatusCode != 303 {
		t.Errorf("the removed member's next page: %d, want 303 to /login", resp.StatusCode)
	}
}

// TestMembersPagePermissions: support staff and members without
// members.manage read the page without forms and are refused on every
// write; an admin may not invite or remove an owner; a custom role with
// members.manage invites; another workspace cannot remove a member here.
func TestMembersPagePermissions(t *testing.T) {
	e := start(t)
	ws, ownerEmail, _ := e.member("", "owner", "")
	ownerID := e.memberID(ws, ownerEmail)
	snapshot := func() string {
		ms, invs := e.listed(ws)
		var b strings.Builder
		for _, m := range ms {
			b.WriteString(m.ID + " ")
		}
		for _, i := range invs {
			b.WriteString("inv:" + i.ID + " ")
		}
		return b.String()
	}

	for _, c := range []struct{ role, perms, says string }{
		{"support", "", "read-only"},
		{"member", "", "members.manage"},
		{"custom", "api_keys.manage", "members.manage"},
	} {
		_, _, cookie := e.member(ws, c.role, c.perms)
		before := snapshot()
		resp, body := e.do("GET", "/settings/members", cookie, nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(body, `data-member-id="`+ownerID+`"`) || !strings.Contains(body, c.says) {
			t.Errorf("%s %q viewing: %d, want the list saying %q", c.role, c.perms, resp.StatusCode, c.says)
		}
		if strings.Contains(body, `action="/settings/members`) {
			t.Errorf("%s %q sees an invite or remove form", c.role, c.perms)
		}
		if resp, body := e.do("POST", "/settings/members", cookie, inviteForm("x"+strings.ToLower(ws)+"@example.com", "member"), nil); resp.StatusCode != 403 || !strings.Contains(body, c.says) || inviteLinkRe.MatchString(body) {
			t.Errorf("%s %q inviting: %d, want 403 saying %q", c.role, c.perms, resp.StatusCode, c.says)
		}
		if resp, body := e.do("POST", "/settings/members/"+ownerID+"/remove", cookie, url.Values{}, nil); resp.StatusCode != 403 || !strings.Contains(body, c.says) {
			t.Errorf("%s %q removing: %d, want 403 saying %q", c.role, c.perms, resp.StatusCode, c.says)
		}
		if after := snapshot(); after != before {
			t.Errorf("%s %q: refused posts changed the members or invitations", c.role, c.perms)
		}
	}

	_, _, admin := e.member(ws, "admin", "")
	before := snapshot()
	_, body := e.do("GET", "/settings/members", admin, nil, nil)
	if strings.Contains(body, `<option value="owner"`) || !strings.Contains(body, `<option value="admin"`) {
		t.Error("an admin is offered the owner role, or not the admin role")
	}
	if strings.Contains(body, `action="/settings/members/`+ownerID+`/remove"`) {
		t.Error("an admin sees a Remove button for an owner")
	}
	resp, body := e.do("POST", "/settings/members", admin, inviteForm("boss"+strings.ToLower(ws)+"@example.com", "owner"), nil)
	if resp.StatusCode != 403 || !strings.Contains(body, "Only an owner may invite an owner.") || inviteLinkRe.MatchString(body) {
		t.Errorf("an admin inviting an owner: %d, want 403 saying only an owner may\n%s", resp.StatusCode, body)
	}
	if resp, body := e.do("POST", "/settings/members/"+ownerID+"/remove", admin, url.Values{}, nil); resp.StatusCode != 403 || !strings.Contains(body, "Only an owner may remove an owner.") {
		t.Errorf("an admin removing the owner: %d, want 403 saying only an owner may", resp.StatusCode)
	}
	if after := snapshot(); after != before {
		t.Error("an admin's refused posts changed the members or invitations")
	}
	if resp, body := e.do("POST", "/settings/members", admin, inviteForm("second"+strings.ToLower(ws)+"@example.com", "admin"), nil); resp.StatusCode != 200 || !inviteLinkRe.MatchString(body) {
		t.Errorf("an admin inviting an admin: %d, want 200 with the link", resp.StatusCode)
	}

	_, _, manager := e.member(ws, "custom", "members.manage")
	if resp, body := e.do("POST", "/settings/members", manager, inviteForm("third"+strings.ToLower(ws)+"@example.com", "member", "api_keys.manage"), nil); resp.StatusCode != 200 || !inviteLinkRe.MatchString(body) {
		t.Errorf("a custom role with members.manage inviting: %d, want 200 with the link", resp.StatusCode)
	}
	if _, invs := e.listed(ws); len(invs) != 2 {
		t.Errorf("%d open invitations, want 2", len(invs))
	}

	// An owner of another workspace cannot remove a member of this one.
	_, _, other := e.member("", "owner", "")
	if resp, _ := e.do("POST", "/settings/members/"+ownerID+"/remove", other, url.Values{}, nil); resp.StatusCode != 404 {
		t.Errorf("another workspace's owner removing: %d, want 404", resp.StatusCode)
	}
	if e.memberID(ws, ownerEmail) == "" {
		t.Error("another workspace's owner removed this workspace's owner")
	}
}

// TestMembersFormsRefuseCrossOriginAndBadInput: cross-origin posts are
// refused; bad input is refused with the reason on the page, the form
// kept and nothing created.
func TestMembersFormsRefuseCrossOriginAndBadInput(t *testing.T) {
	e := start(t)
	ws, _, owner := e.member("", "owner", "")
	_, email, _ := e.member(ws, "member", "")
	id := e.memberID(ws, email)
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "", "Origin": "http://evil.example"},
	} {
		if resp, body := e.do("POST", "/settings/members", owner, inviteForm("csrf"+strings.ToLower(ws)+"@example.com", "admin"), h); resp.StatusCode != 403 || inviteLinkRe.MatchString(body) {
			t.Errorf("cross-origin invite %v: %d, want 403", h, resp.StatusCode)
		}
		if resp, _ := e.do("POST", "/settings/members/"+id+"/remove", owner, url.Values{}, h); resp.StatusCode != 403 {
			t.Errorf("cross-origin remove %v: %d, want 403", h, resp.StatusCode)
		}
	}
	ok := "fine" + strings.ToLower(ws) + "@example.com"
	for _, c := range []struct {
		form url.Values
		says string
	}{
		{inviteForm("not an address", "member"), "must be a valid email address"},
		{inviteForm("", "member"), "must be a valid email address"},
		{inviteForm(ok, "emperor"), `Unknown role &#34;emperor&#34;`},
		{inviteForm(ok, "member", "members.everything"), `Unknown permission &#34;members.everything&#34;`},
		{inviteForm(ok, "admin", "api_keys.manage"), "Role admin takes no named permissions"},
		{inviteForm(ok, "support", "content.manage"), "Role support takes no named permissions"},
	} {
		resp, body := e.do("POST", "/settings/members", owner, c.form, nil)
		if resp.StatusCode != 400 || inviteLinkRe.MatchString(body) || !strings.Contains(body, `role="alert"`) || !strings.Contains(body, c.says) {
			t.Errorf("invite %v: %d, want 400 saying %q\n%s", c.form, resp.StatusCode, c.says, body)
			continue
		}
		if v := c.form.Get("email"); !strings.Contains(body, `value="`+v+`"`) {
			t.Errorf("invite %v: the typed email is not kept", c.form)
		}
		for _, perm := range c.form["permission"] {
			if members.Can(members.Member{Role: members.RoleCustom, Permissions: []string{perm}}, perm) && !strings.Contains(body, `value="`+perm+`" checked`) {
				t.Errorf("invite %v: the checked permission %s is not kept", c.form, perm)
			}
		}
	}
	ms, invs := e.listed(ws)
	if len(ms) != 2 || len(invs) != 0 || e.memberID(ws, email) == "" {
		t.Errorf("refused posts changed the workspace: %d members (want 2), %d invitations (want 0)", len(ms), len(invs))
	}
	_, body := e.do("GET", "/settings/members", owner, nil, nil)
	if n := len(memberRowRe.FindAllString(body, -1)); n != 2 {
		t.Errorf("the page lists %d members, want 2", n)
	}
}
