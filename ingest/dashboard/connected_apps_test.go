package dashboard_test

import (
	"net/url"
	"strings"
	"testing"

	"sendstream/ingest/auth"
	"sendstream/ingest/ingesttest"
)

// TestConnectedAppsDisconnect: an app holding a client_credentials token
// is listed; support staff and members without api_keys.manage cannot
// disconnect it; the owner's Disconnect revokes the token at once.
func TestConnectedAppsDisconnect(t *testing.T) {
	p := startPages(t)
	ws, _ := p.h.NewWorkspace(t, ingesttest.WorkspaceOpts{Plan: auth.PlanPro})
	_, ownerEmail, owner := p.member(ws, "owner", "")
	_, body := p.do("POST", "/settings/oauth-apps", owner, ccForm("reporting bot"), nil)
	m := newSecretRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("create: no secret\n%s", body)
	}
	app := p.apps(ws)[0]

	resp, body := p.do("GET", "/settings/connected-apps", owner, nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "No app is connected") {
		t.Fatalf("before any token: %d\n%s", resp.StatusCode, body)
	}
	st, tok := p.token(app.ClientID, m[1])
	if st != 200 || p.api(tok) != 200 {
		t.Fatalf("client_credentials token: %d, API with it %d", st, p.api(tok))
	}
	resp, body = p.do("GET", "/settings/connected-apps", owner, nil, nil)
	for _, want := range []string{`data-connected-app="` + app.ID + `"`, "reporting bot", ownerEmail + ` <span class="muted">(the app itself, acting as its creator)</span>`, "client_credentials", "contacts:read",
		`action="/settings/connected-apps/` + app.ID + `/disconnect"`} {
		if resp.StatusCode != 200 || !strings.Contains(body, want) {
			t.Errorf("connected apps (%d) lack %q", resp.StatusCode, want)
		}
	}
	if strings.Contains(body, `<span class="muted">none</span>`) {
		t.Error("the connection shows no last token although it has one")
	}

	for _, c := range []struct{ role, perms, says string }{{"support", "", "read-only"}, {"member", "", "api_keys.manage"}} {
		_, _, cookie := p.member(ws, c.role, c.perms)
		resp, body := p.do("GET", "/settings/connected-apps", cookie, nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(body, "reporting bot") || strings.Contains(body, "/disconnect\"") {
			t.Errorf("%s viewing: %d, want the list without a Disconnect form", c.role, resp.StatusCode)
		}
		if resp, body := p.do("POST", "/settings/connected-apps/"+app.ID+"/disconnect", cookie, url.Values{}, nil); resp.StatusCode != 403 || !strings.Contains(body, c.says) {
			t.Errorf("%s disconnecting: %d, want 403 saying %q", c.role, resp.StatusCode, c.says)
		}
	}
	if p.api(tok) != 200 {
		t.Fatal("the token stopped working after refused disconnects")
	}
	if resp, body := p.do("POST", "/settings/connected-apps/nope/disconnect", owner, url.Values{}, nil); resp.StatusCode != 404 || !strings.Contains(body, `role="alert"`) {
		t.Errorf("disconnecting an unknown app: %d, want 404 with the error", resp.StatusCode)
	}
	resp, _ = p.do("POST", "/settings/connected-apps/"+app.ID+"/disconnect", owner, url.Values{}, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/settings/connected-apps" {
		t.Fatalf("disconnect: %d %q, want 303 back", resp.StatusCode, resp.Header.Get("Location"))
	}
	if !p.refused(tok) {
		t.Fatal("the app's token still works after Disconnect")
	}
	if _, body := p.do("GET", "/settings/connected-apps", owner, nil, nil); strings.Contains(body, "reporting bot") {
		t.Error("the disconnected app is still listed")
	}
	// The app itself stays; it can ask for a new token.
	if st, _ := p.token(app.ClientID, m[1]); st != 200 {
		t.Errorf("a new token after Disconnect: %d, want 200", st)
	}
	// The request log names the app of the revoked connection's calls (two
	// before Disconnect, maybe more while the revocation reached the cache).
	rows := p.waitRequests(ws, 2)
	if _, body := p.do("GET", "/logs/requests", owner, nil, nil); strings.Count(body, "app reporting bot (connection ") < 2 {
		t.Errorf("the request log does not name the app on its calls (%d rows):\n%s", len(rows), body)
	}
}
