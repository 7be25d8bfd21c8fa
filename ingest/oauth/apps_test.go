package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/admincli"
	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
	"sendstream/ingest/members"
)

func confidential(ws, by string, grants ...string) NewApp {
	return NewApp{Workspace: ws, Name: "app", Type: TypeConfidential, Grants: grants,
		Scopes: []string{auth.ScopeContactsRead}, RedirectURIs: []string{"https://app.example.com/cb"}, CreatedBy: by}
}

// TestAppRules: spec 5.3 availability, the limit of 10, who may create,
// and the redirect URI forms.
func TestAppRules(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	free, freeOwner := e.workspace(auth.PlanFree, members.RoleOwner, "")
	if _, _, err := e.store.CreateApp(ctx, confidential(free, freeOwner, GrantClientCredentials)); !errors.Is(err, ErrPlan) {
		t.Fatalf("free plan: err %v, want ErrPlan", err)
	}
	ws, owner := e.workspace(auth.PlanPro, members.RoleOwner, "")
	support := e.member(ws, members.RoleSupport, "")
	plain := e.member(ws, members.RoleMember, "")
	keys := e.member(ws, members.RoleCustom, members.PermAPIKeys)
	for name, by := range map[string]string{"support staff": support, "member without api_keys.manage": plain} {
		if _, _, err := e.store.CreateApp(ctx, confidential(ws, by, GrantClientCredentials)); !errors.Is(err, ErrForbidden) {
			t.Errorf("%s creating: err %v, want ErrForbidden", name, err)
		}
	}
	bad := map[string]NewApp{
		"http non-localhost":        {Type: TypePublic, Grants: []string{GrantAuthorizationCode}, RedirectURIs: []string{"http://app.example.com/cb"}},
		"localhost without port":    {Type: TypePublic, Grants: []string{GrantAuthorizationCode}, RedirectURIs: []string{"http://localhost/cb"}},
		"fragment":                  {Type: TypePublic, Grants: []string{GrantAuthorizationCode}, RedirectURIs: []string{"https://a.example.com/cb#x"}},
		"public client_credentials": {Type: TypePublic, Grants: []string{GrantClientCredentials}},
		"unknown scope":             {Type: TypeConfidential, Grants: []string{GrantClientCredentials}, Scopes: []string{"everything"}},
		"no scopes":                 {Type: TypeConfidential, Grants: []string{GrantClientCredentials}, Scopes: []string{}},
	}
	for name, n := range bad {
		n.Workspace, n.Name = ws, "bad"
		if n.Scopes == nil {
			n.Scopes = []string{auth.ScopeContactsRead}
		}
		if _, _, err := e.store.CreateApp(ctx, n); err == nil {
			t.Errorf("%s: created, want refused", name)
		}
	}
	a, secret := e.app(NewApp{Workspace: ws, Name: "local", Type: TypePublic, Grants: []string{GrantAuthorizationCode},
		Scopes: []string{auth.ScopeContactsRead}, RedirectURIs: []string{"http://localhost:8765/cb"}, CreatedBy: keys})
	if secret != "" || !strings.HasPrefix(a.ClientID, ClientIDPrefix) {
		t.Fatalf("public app: secret %q client %q", secret, a.ClientID)
	}
	for i := 1; i < MaxAppsPerWorkspace; i++ {
		e.app(confidential(ws, owner, GrantClientCredentials))
	}
	if _, _, err := e.store.CreateApp(ctx, confidential(ws, owner, GrantClientCredentials)); !errors.Is(err, ErrTooMany) {
		t.Fatalf("11th app: err %v, want ErrTooMany", err)
	}
	apps, err := e.store.Apps(ctx, ws)
	if err != nil || len(apps) != MaxAppsPerWorkspace {
		t.Fatalf("apps: %d %v", len(apps), err)
	}
}

// TestAdminCommands: oauth-app create|rotate-secret|delete as DESIGN.md
// lists them; rotating stops the old secret at once.
func TestAdminCommands(t *testing.T) {
	e := start(t)
	ws, owner := e.workspace(auth.PlanEnterprise, members.RoleOwner, "")
	run := func(args ...string) (map[string]any, error) {
		var out, errOut bytes.Buffer
		env := admincli.NewEnv(func(context.Context) (*pgxpool.Pool, error) { return stack.PG(t), nil }, nil)
		if err := admincli.Run(context.Background(), AdminCommands(), env, args, &out, &errOut); err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("%v printed %q", args, out.String())
		}
		return m, nil
	}
	created, err := run("oauth-app", "create", "--workspace", ws, "--name", "CRM", "--type", "confidential",
		"--grants", "authorization_code,client_credentials,refresh_token", "--scopes", "contacts:read,contacts:write",
		"--redirect-uri", "https://crm.example.com/cb", "--redirect-uri", "http://localhost:9000/cb", "--created-by", owner)
	if err != nil || created["id"] == "" || !strings.HasPrefix(created["clientId"].(string), ClientIDPrefix) ||
		!strings.HasPrefix(created["clientSecret"].(string), SecretPrefix) {
		t.Fatalf("create: %v %v", created, err)
	}
	id, client, old := created["id"].(string), created["clientId"].(string), created["clientSecret"].(string)
	a, err := e.store.App(context.Background(), ws, id)
	if err != nil || len(a.RedirectURIs) != 2 || a.CreatedBy != owner {
		t.Fatalf("stored app %+v %v", a, err)
	}
	tok := func(secret string) *http.Response {
		resp, _ := e.post("/api/oauth/token", params("grant_type", "client_credentials"), client, secret)
		return resp
	}
	if r := tok(old); r.StatusCode != 200 {
		t.Fatalf("old secret before rotation: %d", r.StatusCode)
	}
	rotated, err := run("oauth-app", "rotate-secret", "--workspace", ws, "--id", id)
	if err != nil || rotated["id"] != id || rotated["clientSecret"] == old {
		t.Fatalf("rotate: %v %v", rotated, err)
	}
	if r := tok(old); r.StatusCode != 401 || r.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("old secret after rotation: %d %v, want 401 with WWW-Authenticate", r.StatusCode, r.Header)
	}
	if r := tok(rotated["clientSecret"].(string)); r.StatusCode != 200 {
		t.Fatalf("new secret: %d", r.StatusCode)
	}
	if _, err := run("oauth-app", "delete", "--workspace", ws, "--id", id); err != nil {
		t.Fatal(err)
	}
	if r := tok(rotated["clientSecret"].(string)); r.StatusCode != 401 {
		t.Fatalf("deleted app: %d", r.StatusCode)
	}
	free, _ := e.workspace(auth.PlanFree, members.RoleOwner, "")
	if _, err := run("oauth-app", "create", "--workspace", free, "--name", "x", "--type", "public", "--grants", "authorization_code",
		"--scopes", "contacts:read", "--redirect-uri", "https://x.example.com/cb"); err == nil || !strings.Contains(err.Error(), "Pro or Enterprise") {
		t.Fatalf("free plan via admin: %v", err)
	}
}
