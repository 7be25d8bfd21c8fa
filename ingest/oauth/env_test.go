package oauth

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"sendstream/deploy/stack"
	"sendstream/ingest/auth"
	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/members"
	"sendstream/schemas"
)

const issuer = "http://issuer.test"

// env is one server with the OAuth, members and contacts routes over real
// HTTP and Postgres, its credential cache fed by a Listener as in serve.
type env struct {
	t       *testing.T
	h       *ingesttest.Harness
	store   *Store
	members *members.Store
	emails  map[string]string // member id -> email
}

func start(t *testing.T) *env {
	t.Helper()
	pg := stack.PG(t)
	ms, err := members.New(pg, members.Config{AddressFailures: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := contacts.NewSigner("test secret test secret test secret", 0)
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(pg)
	routes := append(Routes(Deps{Store: st, SiteURL: issuer}), members.Routes(ms)...)
	routes = append(routes, AuthorizeRoutes(Deps{Store: st, SiteURL: issuer}, ms)...)
	routes = append(routes, DashboardRoutes(Deps{Store: st, SiteURL: issuer})...)
	routes = append(routes, contacts.Routes(contacts.Deps{Store: contacts.NewStore(pg), Signer: signer, SiteURL: issuer})...)
	h := ingesttest.StartWith(t, ingesttest.Options{Sessions: ms}, routes...)
	listen(t, h)
	return &env{t: t, h: h, store: st, members: ms, emails: map[string]string{}}
}

// listen feeds h's credential cache from a Listener of its own, as serve
// does for each process.
func listen(t *testing.T, h *ingesttest.Harness) {
	t.Helper()
	l := auth.NewListener(h.PG, nil)
	h.Server.SubscribeCredentials(l)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := l.WaitListening(wctx); err != nil {
		t.Fatal(err)
	}
}

// workspace creates a workspace on plan and a member with role/perms.
func (e *env) workspace(plan, role, perms string) (ws, member string) {
	e.t.Helper()
	ws, _ = e.h.NewWorkspace(e.t, ingesttest.WorkspaceOpts{Plan: plan})
	return ws, e.member(ws, role, perms)
}

func (e *env) member(ws, role, perms string) string {
	e.t.Helper()
	email := "m" + strings.ToLower(schemas.NewID()) + "@example.com"
	id, err := e.members.CreateMember(context.Background(), members.NewMember{Workspace: ws, Email: email,
		Password: "correct horse", Role: role, Permissions: splitPerms(perms)})
	if err != nil {
		e.t.Fatalf("create member: %v", err)
	}
	e.emails[id] = email
	return id
}

func splitPerms(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func (e *env) app(n NewApp) (App, string) {
	e.t.Helper()
	a, secret, err := e.store.CreateApp(context.Background(), n)
	if err != nil {
		e.t.Fatalf("create app: %v", err)
	}
	return a, secret
}

// post sends a form to path; user/pass non-empty use HTTP Basic.
func (e *env) post(path string, form url.Values, user, pass string) (*http.Response, map[string]any) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.h.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(url.QueryEscape(user), url.QueryEscape(pass))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("POST %s: %d %q is not JSON", path, resp.StatusCode, b)
	}
	return resp, m
}

// wantOAuthError checks an RFC 6749 5.2 error answer.
func wantOAuthError(t *testing.T, what string, resp *http.Response, body map[string]any, status int, code string) {
	t.Helper()
	if resp.StatusCode != status || body["error"] != code || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%s: got %d %v (Cache-Control %q), want %d %s", what, resp.StatusCode, body, resp.Header.Get("Cache-Control"), status, code)
	}
}

// call sends a bearer GET/POST to the API and returns the status and body.
func (e *env) call(method, path, token string) (int, string) {
	e.t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(`{"email":"x` + strings.ToLower(schemas.NewID()) + `@example.com"}`)
	}
	req, _ := http.NewRequest(method, e.h.URL+path, body)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually retries f for up to 2 s: a revocation reaches the credential
// cache by a Postgres notification (usually within milliseconds); without
// it the cache would answer from memory for its whole TTL (5 s).
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if f() {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s: not within 2 s", what)
		}
	}
}

// email is the sign-in email of a member made by e.member.
func (e *env) email(member string) string { return e.emails[member] }
