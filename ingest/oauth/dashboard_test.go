package oauth

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"sendstream/ingest/auth"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/members"
)

// api sends a same-origin dashboard call with the browser's session.
func (b *browser) api(method, path, body string) (int, map[string]any) {
	b.t.Helper()
	req, _ := http.NewRequest(method, b.e.h.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(&http.Cookie{Name: "ss_session", Value: b.cookie})
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m
}

// TestDashboardRoutes: members with the API-keys permission create,
// rotate, disconnect and delete apps over the internal routes; support
// staff may list and are refused on every write; API keys are refused.
func TestDashboardRoutes(t *testing.T) {
	e := start(t)
	ws, owner := e.workspace(auth.PlanEnterprise, members.RoleOwner, "")
	admin := e.browser(t)
	admin.signIn(e.email(owner))
	support := e.browser(t)
	support.signIn(e.email(e.member(ws, members.RoleSupport, "")))
	plain := e.browser(t)
	plain.signIn(e.email(e.member(ws, members.RoleMember, "")))

	create := `{"name":"Sync","type":"confidential","grants":["client_credentials"],"scopes":["contacts:read"]}`
	for name, b := range map[string]*browser{"support staff": support, "member without api_keys.manage": plain} {
		if st, m := b.api("POST", "/api/oauth-apps", create); st != 403 {
			t.Fatalf("%s creating: %d %v", name, st, m)
		}
	}
	if st, m := admin.api("POST", "/api/oauth-apps", `{"name":"x","type":"public","grants":["authorization_code"],"scopes":["contacts:read"],"redirectUris":["http://example.com/cb"]}`); st != 400 {
		t.Fatalf("http redirect URI: %d %v", st, m)
	}
	st, m := admin.api("POST", "/api/oauth-apps", create)
	if st != 201 || m["clientSecret"] == "" {
		t.Fatalf("create: %d %v", st, m)
	}
	app := m["app"].(map[string]any)
	id, client, secret := app["id"].(string), app["clientId"].(string), m["clientSecret"].(string)
	if app["createdBy"] != owner {
		t.Fatalf("createdBy %v, want the signed-in member %s", app["createdBy"], owner)
	}
	if st, m := support.api("GET", "/api/oauth-apps", ""); st != 200 || len(m["apps"].([]any)) != 1 {
		t.Fatalf("support staff listing: %d %v", st, m)
	}
	for _, w := range [][2]string{{"POST", "/api/oauth-apps/" + id + "/rotate-secret"}, {"POST", "/api/oauth-apps/" + id + "/disconnect"}, {"DELETE", "/api/oauth-apps/" + id}} {
		if st, _ := support.api(w[0], w[1], ""); st != 403 {
			t.Fatalf("support staff %s %s: %d, want 403", w[0], w[1], st)
		}
	}
	_, key := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	if st, _ := e.call("GET", "/api/oauth-apps", key); st != 401 {
		t.Fatalf("API key on an internal route: %d", st)
	}

	_, tok := e.post("/api/oauth/token", params("grant_type", "client_credentials"), client, secret)
	access := tok["access_token"].(string)
	if st, _ := e.call("GET", "/api/v1/contacts", access); st != 200 {
		t.Fatalf("token: %d", st)
	}
	if st, m := admin.api("POST", "/api/oauth-apps/"+id+"/disconnect", ""); st != 200 {
		t.Fatalf("disconnect: %d %v", st, m)
	}
	eventually(t, "token refused after disconnect", func() bool {
		st, _ := e.call("GET", "/api/v1/contacts", access)
		return st == 401
	})
	st, m = admin.api("POST", "/api/oauth-apps/"+id+"/rotate-secret", "")
	if st != 200 || m["clientSecret"] == secret {
		t.Fatalf("rotate: %d %v", st, m)
	}
	if r, _ := e.post("/api/oauth/token", params("grant_type", "client_credentials"), client, secret); r.StatusCode != 401 {
		t.Fatalf("old secret after rotation: %d", r.StatusCode)
	}
	if st, _ := admin.api("DELETE", "/api/oauth-apps/"+id, ""); st != 200 {
		t.Fatalf("delete: %d", st)
	}
	if st, _ := admin.api("DELETE", "/api/oauth-apps/"+id, ""); st != 404 {
		t.Fatalf("delete again: %d", st)
	}
}
