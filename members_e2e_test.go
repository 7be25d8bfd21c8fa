package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"sendstream/schemas"
)

// TestMemberSignInE2E: the binary's wiring of members and sessions. A
// member made with `admin member create` signs in on one ingest process,
// and the session works on a second one (sessions live in Postgres):
// GET /api/session and GET /api/v1/openapi.json answer with the cookie;
// the internal route refuses the workspace's API key; sign-out on the
// second process ends the session on the first.
func TestMemberSignInE2E(t *testing.T) {
	e := newE2E(t)
	_, a := e.server(t, "ingest")
	_, b := e.server(t, "ingest")
	var ws workspace
	e.admin(t, &ws, "workspace", "create", "--name", "members-e2e")
	email := "e2e" + strings.ToLower(schemas.NewID()) + "@example.com"
	var m map[string]string
	e.admin(t, &m, "member", "create", "--workspace", ws.WorkspaceID, "--email", email, "--password", "correct horse", "--role", "owner")
	if m["id"] == "" {
		t.Fatalf("member create: %v", m)
	}

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("POST", a+"/login", strings.NewReader(url.Values{"email": {email}, "password": {"correct horse"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 303 || len(resp.Cookies()) != 1 {
		t.Fatalf("POST /login: %d %v", resp.StatusCode, resp.Header)
	}
	cookie := resp.Cookies()[0]

	call := func(method, base, path, key string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		} else {
			req.AddCookie(cookie)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, base := range []string{a, b} {
		if st, body := call("GET", base, "/api/session", ""); st != 200 || !strings.Contains(body, ws.WorkspaceID) || !strings.Contains(body, `"role":"owner"`) {
			t.Fatalf("GET %s/api/session: %d %s", base, st, body)
		}
		if st, body := call("GET", base, "/api/v1/openapi.json", ""); st != 200 || !strings.Contains(body, `"openapi"`) {
			t.Fatalf("GET %s/api/v1/openapi.json with a session: %d %.200s", base, st, body)
		}
	}
	if st, body := call("GET", a, "/api/session", ws.APIKey); st != 401 {
		t.Fatalf("GET /api/session with an API key: %d %s", st, body)
	}
	if st, _ := call("POST", b, "/logout", ""); st != 303 {
		t.Fatalf("POST /logout: %d", st)
	}
	if st, _ := call("GET", a, "/api/session", ""); st != 401 {
		t.Fatalf("session after sign-out on the other process: %d", st)
	}
}
