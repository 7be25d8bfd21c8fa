package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// signIn posts the sign-in form to base and returns the session cookie.
func signIn(t *testing.T, base, email, password string) *http.Cookie {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(base+"/login", url.Values{"email": {email}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "ss_session" && resp.StatusCode == 303 {
			return ck
		}
	}
	t.Fatalf("sign in on %s: %d without a session cookie", base, resp.StatusCode)
	return nil
}

// dashboardCall sends a session call to an internal /api route.
func dashboardCall(t *testing.T, method, u string, session *http.Cookie) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	req.AddCookie(session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// The OAuth half of issue 27's revocation test: two ingest processes
// cache OAuth access tokens for a minute (SENDSTREAM_KEY_CACHE_TTL=1m);
// revoking a token (RFC 7009), disconnecting the app, suspending the
// workspace and deleting the app through the first process each make the
// second refuse the tokens within 100 ms, and rotating the app's secret
// makes the second refuse client_credentials with the old secret within
// 100 ms. A control first shows that a connection revoked without a
// notification keeps working on the second process while cached, so only
// the invalidation explains the answers.
func TestRevocationOfOAuthTokensReachesEveryProcessAtOnce(t *testing.T) {
	e := newE2E(t)
	_, first := e.serverWith(t, "ingest", "SENDSTREAM_KEY_CACHE_TTL=1m")
	_, second := e.serverWith(t, "ingest", "SENDSTREAM_KEY_CACHE_TTL=1m")
	s := newOAuthSetup(t, e, "oauth revocation", "client_credentials")
	token := func() string {
		t.Helper()
		st, m := oauthToken(t, first, s.app.ClientID, s.app.ClientSecret, url.Values{"grant_type": {"client_credentials"}})
		if st != 200 {
			t.Fatalf("client_credentials: %d %v", st, m)
		}
		return m["access_token"].(string)
	}
	status := func(base, tok string) (int, string) {
		code, body, _ := get(t, base+"/api/v1/me", tok)
		var b struct{ Code string }
		_ = json.Unmarshal(body, &b)
		return code, b.Code
	}
	cache := func(toks ...string) {
		t.Helper()
		for _, base := range []string{first, second} {
			for _, tok := range toks {
				for range 2 {
					if code, c := status(base, tok); code != 200 {
						t.Fatalf("GET /api/v1/me via %s: %d %s", base, code, c)
					}
				}
			}
		}
	}
	until := func(what string, probe func() bool, done time.Time) {
		t.Helper()
		for !probe() {
			if time.Since(done) > 10*time.Second {
				t.Fatalf("%s: not after 10 s", what)
			}
			time.Sleep(time.Millisecond)
		}
		took := time.Since(done)
		t.Logf("%s: %v after the call through the first process returned", what, took)
		if took > revocationBound {
			t.Errorf("%s: took %v; issue 27 asks for at most %v", what, took, revocationBound)
		}
	}
	answers := func(tok string, code int) func() bool {
		return func() bool { st, _ := status(second, tok); return st == code }
	}

	// Control: a connection revoked in Postgres without a notification.
	silent := token()
	cache(silent)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.st.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	h := sha256sum(silent)
	if tag, err := conn.Exec(ctx, `UPDATE oauth_connections SET revoked_at = now()
		WHERE id = (SELECT connection_id FROM oauth_tokens WHERE token_hash = $1)`, h); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("control revocation: %v %v", tag, err)
	}
	for start := time.Now(); time.Since(start) < 3*revocationBound; time.Sleep(time.Millisecond) {
		if code, c := status(second, silent); code != 200 {
			t.Fatalf("control: a revocation that announced nothing was seen at once (%d %s); the cache is not in effect, so this test proves nothing", code, c)
		}
	}

	// RFC 7009 revocation of one access token.
	revoked, kept := token(), token()
	cache(revoked, kept)
	req, _ := http.NewRequest("POST", first+"/api/oauth/revoke", strings.NewReader(url.Values{"token": {revoked}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(s.app.ClientID), url.QueryEscape(s.app.ClientSecret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("revoke: %v %v", resp, err)
	}
	resp.Body.Close()
	until("revoked token refused by the second process", answers(revoked, 401), time.Now())
	if code, c := status(second, kept); code != 200 {
		t.Fatalf("the app's other token after revoking one: %d %s", code, c)
	}

	// Suspension and resumption reach the OAuth token's cached entry too.
	var out map[string]any
	e.admin(t, &out, "workspace", "suspend", "--workspace", s.ws.WorkspaceID)
	until("suspension, OAuth token on the second process", func() bool {
		st, c := status(second, kept)
		return st == 403 && c == "TEAM_SUSPENDED"
	}, time.Now())
	e.admin(t, &out, "workspace", "resume", "--workspace", s.ws.WorkspaceID)
	until("resumption, OAuth token on the second process", answers(kept, 200), time.Now())

	// Disconnecting the app (the connected-apps list) through the first.
	session := signIn(t, first, s.email, s.passwd)
	apps := first + "/api/oauth-apps/" + s.app.ID
	cache(kept)
	if st, m := dashboardCall(t, "POST", apps+"/disconnect", session); st != 200 {
		t.Fatalf("disconnect: %d %v", st, m)
	}
	until("disconnected app's token refused by the second process", answers(kept, 401), time.Now())

	// Rotating the secret: the old one is refused by the second process.
	st, m := dashboardCall(t, "POST", apps+"/rotate-secret", session)
	if st != 200 || m["clientSecret"] == nil {
		t.Fatalf("rotate: %d %v", st, m)
	}
	done := time.Now()
	old := s.app.ClientSecret
	until("client_credentials with the old secret refused by the second process", func() bool {
		st, m := oauthToken(t, second, s.app.ClientID, old, url.Values{"grant_type": {"client_credentials"}})
		return st == 401 && m["error"] == "invalid_client"
	}, done)
	s.app.ClientSecret = m["clientSecret"].(string)

	// Deleting the app revokes its connections first.
	last := token()
	cache(last)
	if st, m := dashboardCall(t, "DELETE", apps, session); st != 200 {
		t.Fatalf("delete app: %d %v", st, m)
	}
	until("deleted app's token refused by the second process", answers(last, 401), time.Now())
	if st, m := oauthToken(t, second, s.app.ClientID, s.app.ClientSecret, url.Values{"grant_type": {"client_credentials"}}); st != 401 {
		t.Fatalf("client_credentials of a deleted app: %d %v", st, m)
	}
}

// sha256sum is the stored hash of a token.
func sha256sum(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}
