package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"sendstream/ingest/auth"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/oauth"
)

var (
	newSecretRe = regexp.MustCompile(`<code id="new-secret">(ss_cs_[0-9A-Za-z]+)</code>`)
	appRowRe    = regexp.MustCompile(`data-app-id="([^"]+)"`)
)

// appForm is the OAuth apps page's create form.
func appForm(name, typ, redirects string, grants, scopes []string) url.Values {
	return url.Values{"name": {name}, "type": {typ}, "redirect_uris": {redirects}, "grant": grants, "scope": scopes}
}

// ccForm is a confidential client_credentials app with contacts:read.
func ccForm(name string) url.Values {
	return appForm(name, "confidential", "", []string{"client_credentials"}, []string{"contacts:read"})
}

// token asks the token endpoint for a client_credentials token (HTTP
// Basic); it returns the status and the access token.
func (p *pages) token(clientID, secret string) (int, string) {
	p.t.Helper()
	req, err := http.NewRequest("POST", p.h.URL+"/api/oauth/token", strings.NewReader("grant_type=client_credentials&scope=contacts%3Aread"))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	resp, body := p.h.DoRequest(req)
	var ans struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.Unmarshal(body, &ans)
	return resp.StatusCode, ans.AccessToken
}

// apps lists the workspace's apps from the store.
func (p *pages) apps(ws string) []oauth.App {
	p.t.Helper()
	a, err := p.oauth.Apps(context.Background(), ws)
	if err != nil {
		p.t.Fatal(err)
	}
	return a
}

func TestOAuthAppCreatedShownOnceRotatedDeleted(t *testing.T) {
	p := startPages(t)
	ws, _ := p.h.NewWorkspace(t, ingesttest.WorkspaceOpts{Plan: auth.PlanPro})
	_, _, cookie := p.member(ws, "member", "api_keys.manage")

	resp, body := p.do("GET", "/settings/oauth-apps", cookie, nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "has no OAuth apps") || !strings.Contains(body, `action="/settings/oauth-apps"`) {
		t.Fatalf("empty page: %d\n%s", resp.StatusCode, body)
	}
	resp, body = p.do("POST", "/settings/oauth-apps", cookie, ccForm("ci bot"), nil)
	m := newSecretRe.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %d, secret shown %v, Cache-Control %q\n%s", resp.StatusCode, m != nil, resp.Header.Get("Cache-Control"), body)
	}
	secret := m[1]
	apps := p.apps(ws)
	if len(apps) != 1 || apps[0].Name != "ci bot" || apps[0].Type != "confidential" || apps[0].CreatedBy == "" {
		t.Fatalf("stored apps: %+v", apps)
	}
	app := apps[0]
	if !strings.Contains(body, app.ClientID) {
		t.Error("the answer to create does not show the client id")
	}
	if st, tok := p.token(app.ClientID, secret); st != 200 || tok == "" {
		t.Fatalf("token with the shown secret: %d", st)
	}

	resp, body = p.do("GET", "/settings/oauth-apps", cookie, nil, nil)
	if resp.StatusCode != 200 || strings.Contains(body, secret) || strings.Contains(body, secret[len("ss_cs_"):]) {
		t.Fatalf("the list shows the secret again (status %d)", resp.StatusCode)
	}
	for _, want := range []string{`data-app-id="` + app.ID + `"`, app.ClientID, "ci bot", "client_credentials", "contacts:read",
		`action="/settings/oauth-apps/` + app.ID + `/rotate-secret"`, `action="/settings/oauth-apps/` + app.ID + `/delete"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}

	resp, body = p.do("POST", "/settings/oauth-apps/"+app.ID+"/rotate-secret", cookie, url.Values{}, nil)
	m = newSecretRe.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil || m[1] == secret || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("rotate: %d, new secret shown %v", resp.StatusCode, m != nil)
	}
	if st, _ := p.token(app.ClientID, secret); st != 401 {
		t.Errorf("token with the old secret after rotating: %d, want 401", st)
	}
	if st, _ := p.token(app.ClientID, m[1]); st != 200 {
		t.Errorf("token with the rotated secret: %d, want 200", st)
	}

	// A public app: no secret to show or rotate.
	resp, body = p.do("POST", "/settings/oauth-apps", cookie, appForm("spa", "public", "http://localhost:5173/cb\nhttps://app.example/cb",
		[]string{"authorization_code", "refresh_token"}, []string{"contacts:read", "contacts:write"}), nil)
	if resp.StatusCode != 200 || newSecretRe.MatchString(body) || !strings.Contains(body, "has no secret") {
		t.Fatalf("create public: %d\n%s", resp.StatusCode, body)
	}
	var pub oauth.App
	for _, a := range p.apps(ws) {
		if a.Name == "spa" {
			pub = a
		}
	}
	if len(pub.RedirectURIs) != 2 || pub.RedirectURIs[1] != "https://app.example/cb" {
		t.Fatalf("public app stored as %+v", pub)
	}
	if resp, body := p.do("POST", "/settings/oauth-apps/"+pub.ID+"/rotate-secret", cookie, url.Values{}, nil); resp.StatusCode != 404 || !strings.Contains(body, "public") {
		t.Errorf("rotating a public app: %d, want 404 saying it is public", resp.StatusCode)
	}

	resp, _ = p.do("POST", "/settings/oauth-apps/"+app.ID+"/delete", cookie, url.Values{}, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/settings/oauth-apps" {
		t.Fatalf("delete: %d %q, want 303 back", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, body := p.do("GET", "/settings/oauth-apps", cookie, nil, nil); strings.Contains(body, app.ID) || !strings.Contains(body, pub.ID) {
		t.Error("after deleting, the list still shows the app or lost the other")
	}
	if st, _ := p.token(app.ClientID, m[1]); st != 401 {
		t.Errorf("token of the deleted app: %d, want 401", st)
	}
	if resp, body := p.do("POST", "/settings/oauth-apps/"+app.ID+"/delete", cookie, url.Values{}, nil); resp.StatusCode != 404 || !strings.Contains(body, `role="alert"`) {
		t.Errorf("deleting again: %d, want 404 with the error shown", resp.StatusCode)
	}
}

func TestOAuthAppBadInputPlanAndLimit(t *testing.T) {
	p := startPages(t)
	ws, _ := p.h.NewWorkspace(t, ingesttest.WorkspaceOpts{Plan: auth.PlanEnterprise})
	_, _, cookie := p.member(ws, "owner", "")
	for _, c := range []struct {
		form url.Values
		says string
	}{
		{ccForm(" "), "Name is required"},
		{appForm("bad type", "secretive", "", []string{"client_credentials"}, []string{"contacts:read"}), "want confidential or public"},
		{appForm("no grant", "confidential", "", nil, []string{"contacts:read"}), "at least one grant"},
		{appForm("no scope", "confidential", "", []string{"client_credentials"}, nil), "at least one scope"},
		{appForm("bad scope", "confidential", "", []string{"client_credentials"}, []string{"contacts:everything"}), "contacts:everything"},
		{appForm("public cc", "public", "", []string{"client_credentials"}, []string{"contacts:read"}), "needs a confidential app"},
		{appForm("plain http", "confidential", "http://app.example/cb", []string{"authorization_code"}, []string{"contacts:read"}), "allowed forms are https"},
		{appForm("no redirect", "confidential", "", []string{"authorization_code"}, []string{"contacts:read"}), "needs at least one redirect URI"},
	} {
		resp, body := p.do("POST", "/settings/oauth-apps", cookie, c.form, nil)
		if resp.StatusCode != 400 || !strings.Contains(body, `role="alert"`) || !strings.Contains(strings.ToLower(body), strings.ToLower(c.says)) || newSecretRe.MatchString(body) {
			t.Errorf("create %v: %d, want 400 saying %q", c.form, resp.StatusCode, c.says)
		}
		if name := strings.TrimSpace(c.form.Get("name")); name != "" && !strings.Contains(body, `value="`+name+`"`) {
			t.Errorf("create %v: the form lost the name", c.form)
		}
	}
	if n := len(p.apps(ws)); n != 0 {
		t.Fatalf("refused forms created %d apps", n)
	}

	// Ten apps are allowed; the eleventh is refused and nothing changes.
	for i := 1; i <= oauth.MaxAppsPerWorkspace; i++ {
		if resp, body := p.do("POST", "/settings/oauth-apps", cookie, ccForm(fmt.Sprint("app ", i)), nil); resp.StatusCode != 200 {
			t.Fatalf("app %d: %d\n%s", i, resp.StatusCode, body)
		}
	}
	resp, body := p.do("POST", "/settings/oauth-apps", cookie, ccForm("eleventh"), nil)
	if resp.StatusCode != 409 || !strings.Contains(body, "(10)") || newSecretRe.MatchString(body) {
		t.Errorf("11th app: %d, want 409 naming the limit of 10", resp.StatusCode)
	}
	if n := len(appRowRe.FindAllString(body, -1)); n != 10 {
		t.Errorf("the page after the refusal lists %d apps, want 10", n)
	}
	if n := len(p.apps(ws)); n != 10 {
		t.Errorf("%d apps stored, want 10", n)
	}

	free, _ := p.h.NewWorkspace(t, ingesttest.WorkspaceOpts{Plan: auth.PlanFree})
	_, _, freeOwner := p.member(free, "owner", "")
	_, body = p.do("GET", "/settings/oauth-apps", freeOwner, nil, nil)
	if !strings.Contains(body, "need the Pro or Enterprise plan") {
		t.Error("the free workspace's page does not say apps need Pro or Enterprise")
	}
	resp, body = p.do("POST", "/settings/oauth-apps", freeOwner, ccForm("free app"), nil)
	if resp.StatusCode != 403 || !strings.Contains(body, "Pro or Enterprise") || newSecretRe.MatchString(body) {
		t.Errorf("free plan create: %d, want 403 naming the plans", resp.StatusCode)
	}
	if n := len(p.apps(free)); n != 0 {
		t.Errorf("the free workspace has %d apps", n)
	}
}

func TestOAuthAppsPagePermissionsAndCrossOrigin(t *testing.T) {
	p := startPages(t)
	ws, _ := p.h.NewWorkspace(t, ingesttest.WorkspaceOpts{Plan: auth.PlanPro})
	_, _, owner := p.member(ws, "owner", "")
	_, body := p.do("POST", "/settings/oauth-apps", owner, ccForm("kept"), nil)
	secret := newSecretRe.FindStringSubmatch(body)[1]
	app := p.apps(ws)[0]
	writes := []pageCall{
		{"POST", "/settings/oauth-apps", ccForm("nope")},
		{"POST", "/settings/oauth-apps/" + app.ID + "/rotate-secret", url.Values{}},
		{"POST", "/settings/oauth-apps/" + app.ID + "/delete", url.Values{}},
		{"POST", "/settings/connected-apps/" + app.ID + "/disconnect", url.Values{}},
	}
	for _, c := range []struct{ role, perms, says string }{
		{"member", "", "api_keys.manage"},
		{"custom", "webhooks.manage", "api_keys.manage"},
		{"support", "", "read-only"},
	} {
		_, _, cookie := p.member(ws, c.role, c.perms)
		resp, body := p.do("GET", "/settings/oauth-apps", cookie, nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(body, `data-app-id="`+app.ID+`"`) {
			t.Errorf("%s %s viewing: %d, want 200 with the list (spec 5.3: support staff can view)", c.role, c.perms, resp.StatusCode)
		}
		if strings.Contains(body, `method="post" action="/settings/oauth-apps`) {
			t.Errorf("%s %s sees a create, rotate or delete form", c.role, c.perms)
		}
		p.expectRefused(cookie, c.role+" "+c.perms, writes, c.says, `id="new-secret"`)
	}
	_, _, other := p.member("", "owner", "")
	for _, w := range writes[1:] {
		if resp, _ := p.do("POST", w.path, other, w.form, nil); resp.StatusCode != 404 {
			t.Errorf("another workspace's owner POST %s: %d, want 404", w.path, resp.StatusCode)
		}
	}
	for _, h := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "", "Origin": "http://evil.example"}} {
		for _, w := range writes {
			if resp, body := p.do("POST", w.path, owner, w.form, h); resp.StatusCode != 403 || newSecretRe.MatchString(body) {
				t.Errorf("cross-origin POST %s %v: %d, want 403", w.path, h, resp.StatusCode)
			}
		}
	}
	if apps := p.apps(ws); len(apps) != 1 || apps[0].ID != app.ID {
		t.Errorf("refused posts changed the apps: %+v", apps)
	}
	if st, _ := p.token(app.ClientID, secret); st != 200 {
		t.Errorf("the secret after refused rotations: %d, want 200", st)
	}
}

func TestPagesWithoutSessionGoToLogin(t *testing.T) {
	p := startPages(t)
	for _, path := range []string{"/settings/oauth-apps", "/settings/connected-apps", "/logs/requests", "/logs/messages"} {
		resp, _ := p.do("GET", path, "", nil, nil)
		if want := "/login?next=" + url.QueryEscape(path); resp.StatusCode != 303 || resp.Header.Get("Location") != want {
			t.Errorf("GET %s without a session: %d %q, want 303 %s", path, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	for _, path := range []string{"/settings/oauth-apps", "/settings/oauth-apps/x/rotate-secret", "/settings/oauth-apps/x/delete", "/settings/connected-apps/x/disconnect"} {
		resp, _ := p.do("POST", path, "", url.Values{}, nil)
		if resp.StatusCode != 303 || !strings.HasPrefix(resp.Header.Get("Location"), "/login?") {
			t.Errorf("POST %s without a session: %d %q, want 303 to /login", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}
