package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"sendstream/deploy/admincli"
	"sendstream/deploy/stack"
	"sendstream/ingest"
	"sendstream/ingest/auth"
	"sendstream/ingest/contacts"
	"sendstream/ingest/dashboard"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/members"
	"sendstream/schemas"
)

// env is one server with the dashboard, sign-in and contacts routes over
// real HTTP and Postgres, its credential cache fed by a Listener as serve
// does for each process.
type env struct {
	t       *testing.T
	h       *ingesttest.Harness
	client  *http.Client   // never follows redirects
	members *members.Store // the server's sessions and members
}

func start(t *testing.T) *env {
	t.Helper()
	return serveDashboard(t, dashboard.Deps{}, nil)
}

// serveDashboard starts one server with the dashboard built from d (its
// Sessions and Members a members store on the stack's Postgres, Keys an
// auth.Store when nil), the sign-in routes, the contacts routes on cs (a
// new store when nil) and extra, its credential cache fed by a Listener
// as serve does for each process.
func serveDashboard(t *testing.T, d dashboard.Deps, cs *contacts.Store, extra ...ingest.Route) *env {
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
	if cs == nil {
		cs = contacts.NewStore(pg)
		t.Cleanup(cs.Close)
	}
	d.Sessions, d.Members = ms, ms
	if d.Keys == nil {
		d.Keys = auth.NewStore(pg)
	}
	routes := dashboard.Routes(d)
	routes = append(routes, members.Routes(ms)...)
	routes = append(routes, contacts.Routes(contacts.Deps{Store: cs, Signer: signer, SiteURL: "http://site.test"})...)
	routes = append(routes, extra...)
	// A cache TTL of a minute: a deleted credential fails sooner only
	// through the invalidation (NOTIFY) that deleting sends.
	h := ingesttest.StartWith(t, ingesttest.Options{Sessions: ms, Config: ingest.Config{KeyCacheTTL: time.Minute}}, routes...)
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
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(c.CloseIdleConnections)
	return &env{t: t, h: h, client: c, members: ms}
}

// adminMember runs `admin member create` as the operator does.
func adminMember(t *testing.T, ws, email, role, perms string) {
	t.Helper()
	args := []string{"member", "create", "--workspace", ws, "--email", email, "--password", "correct horse", "--role", role}
	if perms != "" {
		args = append(args, "--permissions", perms)
	}
	var out, errOut bytes.Buffer
	e := admincli.NewEnv(func(context.Context) (*pgxpool.Pool, error) { return stack.PG(t), nil }, nil)
	if err := admincli.Run(context.Background(), members.AdminCommands(), e, args, &out, &errOut); err != nil {
		t.Fatalf("admin member create: %v (%s)", err, errOut.String())
	}
	var m map[string]string
	if err := json.Unmarshal(out.Bytes(), &m); err != nil || m["id"] == "" {
		t.Fatalf("member create printed %q", out.String())
	}
}

// member creates a member with role and perms in workspace ws (a new one
// when "") and returns the workspace, the member's email, and a session
// cookie from signing in through POST /login.
func (e *env) member(ws, role, perms string) (string, string, string) {
	e.t.Helper()
	if ws == "" {
		ws, _ = e.h.NewWorkspace(e.t, ingesttest.WorkspaceOpts{})
	}
	email := "m" + strings.ToLower(schemas.NewID()) + "@example.com"
	adminMember(e.t, ws, email, role, perms)
	resp, _ := e.do("POST", "/login", "", url.Values{"email": {email}, "password": {"correct horse"}}, nil)
	for _, ck := range resp.Cookies() {
		if ck.Name == "ss_session" && ck.Value != "" {
			return ws, email, ck.Name + "=" + ck.Value
		}
	}
	e.t.Fatalf("sign-in of %s: %d without a session cookie", email, resp.StatusCode)
	return "", "", ""
}

// do sends a request (a form when form is not nil) with the cookie and
// extra headers, and returns the answer and its body. Forms are sent as a
// same-origin browser would (Sec-Fetch-Site) unless headers say otherwise.
func (e *env) do(method, path, cookie string, form url.Values, headers map[string]string) (*http.Response, string) {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.h.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return e.send(req)
}

// send sends req with e's client (redirects not followed) and returns the
// answer and its body; a request that gets no answer fails the test.
func (e *env) send(req *http.Request) (*http.Response, string) {
	e.t.Helper()
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// api calls GET /api/v1/contacts with an API key and returns the status.
func (e *env) api(key string) int {
	e.t.Helper()
	resp, _ := e.do("GET", "/api/v1/contacts", "", nil, map[string]string{"Authorization": "Bearer " + key})
	return resp.StatusCode
}

// refused waits for the key to be refused with 401 (the invalidation
// reaches the cache asynchronously, within milliseconds; the TTL is a
// minute) and reports whether it was within ten seconds.
func (e *env) refused(key string) bool {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if e.api(key) == 401 {
			return true
		}
	}
	return false
}
