package members

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
	"sendstream/ingest/auth"
	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

// env is one server with the members routes, over real HTTP and Postgres.
type env struct {
	t      *testing.T
	h      *ingesttest.Harness
	store  *Store
	client *http.Client // never follows redirects
}

func start(t *testing.T, cfg Config) *env {
	t.Helper()
	pg := stack.PG(t)
	if cfg.AddressFailures == 0 {
		cfg.AddressFailures = 1 << 20 // tests share 127.0.0.1; only the address test bounds it
	}
	st, err := New(pg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := ingesttest.StartWith(t, ingesttest.Options{Sessions: st}, Routes(st)...)
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(c.CloseIdleConnections)
	return &env{t: t, h: h, store: st, client: c}
}

// adminMember runs `admin member create` and returns the member id.
func adminMember(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := admincli.NewEnv(func(context.Context) (*pgxpool.Pool, error) { return stack.PG(t), nil }, nil)
	cmds := append(auth.AdminCommands(), AdminCommands()...)
	if err := admincli.Run(context.Background(), cmds, e, append([]string{"member", "create"}, args...), &out, &errOut); err != nil {
		return "", err
	}
	var m map[string]string
	if err := json.Unmarshal(out.Bytes(), &m); err != nil || m["id"] == "" || len(m) != 1 {
		t.Fatalf("member create printed %q, want {\"id\"}", out.String())
	}
	return m["id"], nil
}

// member creates a workspace (through the harness) and a member of it.
func (e *env) member(role, perms string) (ws, email, apiKey string) {
	e.t.Helper()
	ws, apiKey = e.h.NewWorkspace(e.t, ingesttest.WorkspaceOpts{})
	email = "m" + strings.ToLower(schemas.NewID()) + "@example.com"
	args := []string{"--workspace", ws, "--email", email, "--password", "correct horse", "--role", role}
	if perms != "" {
		args = append(args, "--permissions", perms)
	}
	if _, err := adminMember(e.t, args...); err != nil {
		e.t.Fatalf("member create: %v", err)
	}
	return ws, email, apiKey
}

// do sends a request with optional cookie, bearer key and extra headers.
func (e *env) do(method, path, cookie, key string, body io.Reader, hdr map[string]string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.h.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "ss_session", Value: cookie})
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login posts the sign-in form as a same-origin browser would.
func (e *env) login(email, password, next string) (*http.Response, string) {
	e.t.Helper()
	form := url.Values{"email": {email}, "password": {password}, "next": {next}}
	return e.do("POST", "/login", "", "", strings.NewReader(form.Encode()), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin", "Origin": e.h.URL,
	})
}

// signIn signs in and returns the session cookie's value.
func (e *env) signIn(email string) string {
	e.t.Helper()
	resp, body := e.login(email, "correct horse", "")
	if resp.StatusCode != 303 {
		e.t.Fatalf("sign in %s: %d %.300s", email, resp.StatusCode, body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "ss_session" && c.Value != "" {
			return c.Value
		}
	}
	e.t.Fatalf("sign in: no session cookie in %v", resp.Header["Set-Cookie"])
	return ""
}

func TestSignInSessionAndSignOut(t *testing.T) {
	e := start(t, Config{})
	ws, email, _ := e.member(RoleAdmin, "")

	resp, page := e.do("GET", "/login?next=/settings/api-keys", "", "", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(page, `<form method="post" action="/login">`) ||
		!strings.Contains(page, `value="/settings/api-keys"`) || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("GET /login: %d %v %.500s", resp.StatusCode, resp.Header, page)
	}

	// Wrong password and unknown email: the same answer.
	r1, b1 := e.login(email, "wrong password", "")
	other := "nobody" + strings.ToLower(schemas.NewID()) + "@example.com"
	r2, b2 := e.login(other, "wrong password", "")
	if r1.StatusCode != 401 || r2.StatusCode != 401 || !strings.Contains(b1, "Email or password is incorrect.") ||
		strings.ReplaceAll(b1, email, "E") != strings.ReplaceAll(b2, other, "E") || len(r1.Cookies())+len(r2.Cookies()) != 0 {
		t.Fatalf("bad password %d / unknown email %d differ or set cookies:\n%s\n%s", r1.StatusCode, r2.StatusCode, b1, b2)
	}

	resp, _ = e.login("  "+strings.ToUpper(email)+" ", "correct horse", "/settings/api-keys")
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/settings/api-keys" {
		t.Fatalf("sign in: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	sc := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"ss_session=", "Path=/", "HttpOnly", "SameSite=Lax", "Max-Age=1209600"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %s", sc, want)
		}
	}
	if strings.Contains(sc, "Secure") {
		t.Errorf("Set-Cookie %q is Secure on an http site", sc)
	}
	cookie := resp.Cookies()[0].Value

	resp, body := e.do("GET", "/api/session", cookie, "", nil, nil)
	var got sessionAnswer
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &got) != nil {
		t.Fatalf("GET /api/session: %d %s", resp.StatusCode, body)
	}
	if got.Workspace.ID != ws || got.Member.Email != email || got.Member.Role != RoleAdmin ||
		len(got.Member.Permissions) != len(Permissions) || got.Session.ID == "" {
		t.Fatalf("GET /api/session: %+v", got)
	}

	// An open redirect is never followed.
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example"} {
		if resp, _ := e.login(email, "correct horse", next); resp.StatusCode != 303 || resp.Header.Get("Location") != "/" {
			t.Errorf("next=%q: %d Location %q, want /", next, resp.StatusCode, resp.Header.Get("Location"))
		}
	}

	resp, _ = e.do("POST", "/logout", cookie, "", nil, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/login" || !strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, body := e.do("GET", "/api/session", cookie, "", nil, nil); resp.StatusCode != 401 || !strings.Contains(body, `"code":"unauthorized"`) {
		t.Fatalf("session after logout: %d %s", resp.StatusCode, body)
	}
}

func TestCookieSecureOnHTTPS(t *testing.T) {
	st, err := New(nil, Config{SiteURL: "https://app.example"})
	if err != nil {
		t.Fatal(err)
	}
	c := st.cookie("tok", time.Hour)
	for _, want := range []string{"ss_session=tok", "Secure", "HttpOnly", "SameSite=Lax", "Path=/"} {
		if !strings.Contains(c, want) {
			t.Errorf("cookie %q lacks %s", c, want)
		}
	}
}

// TestThrottlePerAccount: after AccountFailures wrong passwords the right
// one is refused too, until the window has passed.
func TestThrottlePerAccount(t *testing.T) {
	// The window must hold three failed sign-ins and the fourth (each an
	// argon2 hash, slow under load: 2 s failed once at load 12) and still
	// pass while the test waits.
	e := start(t, Config{AccountFailures: 3, FailureWindow: 6 * time.Second})
	_, email, _ := e.member(RoleMember, "")
	for i := 0; i < 3; i++ {
		if resp, _ := e.login(email, "wrong password", ""); resp.StatusCode != 401 {
			t.Fatalf("failure %d: %d", i, resp.StatusCode)
		}
	}
	resp, body := e.login(email, "correct horse", "")
	if resp.StatusCode != 429 || !strings.Contains(body, "Too many failed sign-ins") || len(resp.Cookies()) != 0 {
		t.Fatalf("correct password while throttled: %d %.300s", resp.StatusCode, body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, _ := e.login(email, "correct horse", "")
		if resp.StatusCode == 303 {
			break
		}
		if resp.StatusCode != 429 || time.Now().After(deadline) {
			t.Fatalf("after the window: %d", resp.StatusCode)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestThrottlePerAddress: failures for many emails from one address stop
// every sign-in from it, a member's right password included.
func TestThrottlePerAddress(t *testing.T) {
	e := start(t, Config{AddressFailures: 3, FailureWindow: time.Hour})
	_, email, _ := e.member(RoleMember, "")
	if _, err := e.h.PG.Exec(context.Background(), "DELETE FROM login_failures WHERE key = 'address:127.0.0.1'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.h.PG.Exec(context.Background(), "DELETE FROM login_failures WHERE key = 'address:127.0.0.1'")
	})
	for i := 0; i < 3; i++ {
		if resp, _ := e.login("x"+strings.ToLower(schemas.NewID())+"@example.com", "wrong password", ""); resp.StatusCode != 401 {
			t.Fatalf("failure %d: %d", i, resp.StatusCode)
		}
	}
	if resp, body := e.login(email, "correct horse", ""); resp.StatusCode != 429 {
		t.Fatalf("correct password from a throttled address: %d %.300s", resp.StatusCode, body)
	}
}

func TestCrossOriginRefused(t *testing.T) {
	e := start(t, Config{})
	_, email, _ := e.member(RoleOwner, "")
	cookie := e.signIn(email)
	form := url.Values{"email": {email}, "password": {"correct horse"}}.Encode()
	cross := []map[string]string{
		{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		{"Origin": "https://evil.example"}, // an older browser: no Sec-Fetch-Site
	}
	for _, h := range cross {
		h["Content-Type"] = "application/x-www-form-urlencoded"
		if resp, body := e.do("POST", "/login", "", "", strings.NewReader(form), h); resp.StatusCode != 403 ||
			!strings.Contains(body, `"code":"cross_origin_request"`) || len(resp.Cookies()) != 0 {
			t.Errorf("cross-origin POST /login %v: %d %s", h, resp.StatusCode, body)
		}
		if resp, _ := e.do("POST", "/logout", cookie, "", nil, h); resp.StatusCode != 403 {
			t.Errorf("cross-origin POST /logout %v: %d", h, resp.StatusCode)
		}
		if resp, _ := e.do("POST", "/api/invitations", cookie, "", strings.NewReader(`{"email":"a@example.com","role":"member"}`), h); resp.StatusCode != 403 {
			t.Errorf("cross-origin POST /api/invitations %v: %d", h, resp.StatusCode)
		}
	}
	// The refused logout left the session alive.
	if resp, _ := e.do("GET", "/api/session", cookie, "", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("session after refused cross-origin logout: %d", resp.StatusCode)
	}
}

func TestInternalRoutesRefuseAPIKeys(t *testing.T) {
	e := start(t, Config{})
	_, email, key := e.member(RoleOwner, "")
	cookie := e.signIn(email)
	for _, c := range []struct{ name, cookie, key string }{{"API key", "", key}, {"API key and session", cookie, key}, {"nothing", "", ""}, {"unknown session", "x" + cookie, ""}} {
		resp, body := e.do("GET", "/api/session", c.cookie, c.key, nil, nil)
		var eb struct{ Error, Code string }
		if resp.StatusCode != 401 || json.Unmarshal([]byte(body), &eb) != nil || eb.Error == "" || eb.Code != "unauthorized" {
			t.Errorf("GET /api/session with %s: %d %s", c.name, resp.StatusCode, body)
		}
	}
	if resp, _ := e.do("GET", "/api/v1/me", cookie, "", nil, nil); resp.StatusCode != 401 {
		t.Errorf("GET /api/v1/me with only a session: %d, want 401 (it takes API keys)", resp.StatusCode)
	}
}

func TestOpenAPIWithSession(t *testing.T) {
	e := start(t, Config{})
	_, email, key := e.member(RoleSupport, "")
	cookie := e.signIn(email)
	resp, body := e.do("GET", "/api/v1/openapi.json", cookie, "", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `"openapi":"3.1`) {
		t.Fatalf("openapi.json with a session: %d %.200s", resp.StatusCode, body)
	}
	if resp, _ := e.do("GET", "/api/v1/openapi.json", "", key, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("openapi.json with an API key: %d", resp.StatusCode)
	}
	e.do("POST", "/logout", cookie, "", nil, nil)
	if resp, _ := e.do("GET", "/api/v1/openapi.json", cookie, "", nil, nil); resp.StatusCode != 401 {
		t.Fatalf("openapi.json with a revoked session: %d", resp.StatusCode)
	}
}

// TestSupportReadOnlyAndInvitations: support staff read but every write
// is refused; an owner invites, the invitee joins with the link.
func TestSupportReadOnlyAndInvitations(t *testing.T) {
	e := start(t, Config{})
	ws, owner, _ := e.member(RoleOwner, "")
	support := "s" + strings.ToLower(schemas.NewID()) + "@example.com"
	if _, err := adminMember(t, "--workspace", ws, "--email", support, "--password", "correct horse", "--role", "support"); err != nil {
		t.Fatal(err)
	}
	sc := e.signIn(support)
	resp, body := e.do("GET", "/api/session", sc, "", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `"role":"support","permissions":[]`) {
		t.Fatalf("support GET /api/session: %d %s", resp.StatusCode, body)
	}
	same := map[string]string{"Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}
	invite := func(cookie, role string) (*http.Response, string) {
		return e.do("POST", "/api/invitations", cookie, "", strings.NewReader(`{"email":"new`+strings.ToLower(schemas.NewID())+`@example.com","role":"`+role+`"}`), same)
	}
	if resp, body := invite(sc, RoleMember); resp.StatusCode != 403 || !strings.Contains(body, "read-only") {
		t.Fatalf("support invites: %d %s", resp.StatusCode, body)
	}
	oc := e.signIn(owner)
	resp, body = invite(oc, RoleCustom)
	var inv Invitation
	if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &inv) != nil || inv.Token == "" || !strings.Contains(inv.AcceptURL, inv.Token) {
		t.Fatalf("owner invites: %d %s", resp.StatusCode, body)
	}
	form := url.Values{"token": {inv.Token}, "password": {"another horse"}}.Encode()
	hdr := map[string]string{"Sec-Fetch-Site": "same-origin", "Content-Type": "application/x-www-form-urlencoded"}
	resp, body = e.do("POST", "/invitation", "", "", strings.NewReader(form), hdr)
	if resp.StatusCode != 303 || len(resp.Cookies()) != 1 {
		t.Fatalf("accept invitation: %d %.300s", resp.StatusCode, body)
	}
	resp, body = e.do("GET", "/api/session", resp.Cookies()[0].Value, "", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `"email":"`+inv.Email+`","role":"custom","permissions":[]`) || !strings.Contains(body, ws) {
		t.Fatalf("invitee's session: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.do("POST", "/invitation", "", "", strings.NewReader(form), hdr); resp.StatusCode != 400 {
		t.Fatalf("invitation used twice: %d", resp.StatusCode)
	}
	// An admin may not make owners.
	_, admin, _ := e.member(RoleAdmin, "")
	ac := e.signIn(admin)
	if resp, body := invite(ac, RoleOwner); resp.StatusCode != 403 {
		t.Fatalf("admin invites an owner: %d %s", resp.StatusCode, body)
	}
}

func TestCan(t *testing.T) {
	for _, c := range []struct {
		m    Member
		perm string
		want bool
	}{
		{Member{Role: RoleOwner}, PermMembers, true},
		{Member{Role: RoleAdmin}, PermAPIKeys, true},
		{Member{Role: RoleMember}, PermWebhooks, false},
		{Member{Role: RoleMember, Permissions: []string{PermWebhooks}}, PermWebhooks, true},
		{Member{Role: RoleMember}, PermAPIKeys, false},
		{Member{Role: RoleMember, Permissions: []string{PermAPIKeys}}, PermAPIKeys, true},
		{Member{Role: RoleCustom, Permissions: []string{PermAPIKeys}}, PermAPIKeys, true},
		{Member{Role: RoleCustom, Permissions: []string{PermAPIKeys}}, PermWebhooks, false},
		{Member{Role: RoleSupport, Permissions: []string{PermAPIKeys}}, PermAPIKeys, false},
		{Member{Role: RoleOwner}, "billing.manage", false},
		{Member{Role: "king"}, PermAPIKeys, false},
	} {
		if got := Can(c.m, c.perm); got != c.want {
			t.Errorf("Can(%s %v, %s) = %v", c.m.Role, c.m.Permissions, c.perm, got)
		}
	}
	for _, p := range Permissions {
		if Can(Member{Role: RoleSupport}, p) {
			t.Errorf("support can %s", p)
		}
	}
}

func TestAdminMemberCreate(t *testing.T) {
	e := start(t, Config{})
	ws, _ := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	email := "c" + strings.ToLower(schemas.NewID()) + "@example.com"
	bad := [][]string{
		{"--role", "king"},
		{"--role", "owner", "--permissions", PermAPIKeys},
		{"--role", "support", "--permissions", PermAPIKeys},
		{"--role", "custom", "--permissions", "rockets.launch"},
	}
	for _, b := range bad {
		if _, err := adminMember(t, append([]string{"--workspace", ws, "--email", email, "--password", "correct horse"}, b...)...); err == nil {
			t.Errorf("member create %v accepted", b)
		}
	}
	if _, err := adminMember(t, "--workspace", ws, "--email", email, "--password", "correct horse", "--role", "custom", "--permissions", PermAPIKeys); err != nil {
		t.Fatal(err)
	}
	cookie := e.signIn(email)
	if resp, body := e.do("GET", "/api/session", cookie, "", nil, nil); !strings.Contains(body, `"role":"custom","permissions":["api_keys.manage"]`) {
		t.Fatalf("custom member: %d %s", resp.StatusCode, body)
	}
	// The same person in a second workspace keeps one password.
	ws2, _ := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	if _, err := adminMember(t, "--workspace", ws2, "--email", email, "--password", "a different one", "--role", "member"); err == nil {
		t.Fatal("a second workspace set a second password")
	}
	if _, err := adminMember(t, "--workspace", ws2, "--email", email, "--password", "correct horse", "--role", "member"); err != nil {
		t.Fatal(err)
	}
	var hash string
	if err := e.h.PG.QueryRow(context.Background(), "SELECT password_hash FROM logins WHERE email = $1", email).Scan(&hash); err != nil ||
		!strings.HasPrefix(hash, "$argon2id$v=19$") || strings.Contains(hash, "correct horse") {
		t.Fatalf("stored hash %q: %v", hash, err)
	}
}

// TestHasherBound: with every slot taken, a hash waits (here until its
// context ends) instead of running.
func TestHasherBound(t *testing.T) {
	h, err := NewHasher(2)
	if err != nil {
		t.Fatal(err)
	}
	h.sem <- struct{}{}
	h.sem <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Verify(ctx, h.dummy, "x"); err == nil {
		t.Fatal("Verify ran with every slot taken")
	}
	<-h.sem
	if ok, err := h.Verify(context.Background(), h.dummy, "x"); err != nil || ok {
		t.Fatalf("Verify with a free slot: %v %v", ok, err)
	}
}

// TestIdleSessionEnds: a session unused for longer than SessionIdle is
// refused from then on.
func TestIdleSessionEnds(t *testing.T) {
	// 3 s: a sign-in and the first call must fit within the idle time
	// (1 s did not at load 18 under -race).
	e := start(t, Config{SessionIdle: 3 * time.Second})
	_, email, _ := e.member(RoleMember, "")
	cookie := e.signIn(email)
	if resp, _ := e.do("GET", "/api/session", cookie, "", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("fresh session: %d", resp.StatusCode)
	}
	time.Sleep(3500 * time.Millisecond) // longer than the idle timeout, without a call
	if resp, body := e.do("GET", "/api/session", cookie, "", nil, nil); resp.StatusCode != 401 {
		t.Fatalf("idle session: %d %s", resp.StatusCode, body)
	}
}
