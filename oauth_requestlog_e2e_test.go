package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// oauthToken posts a token request with HTTP Basic client authentication
// and returns the status and the decoded answer.
func oauthToken(t *testing.T, base, client, secret string, form url.Values) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(client), url.QueryEscape(secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /api/oauth/token: %v", err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("POST /api/oauth/token: %d, answer not JSON: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, m
}

// oauthSetup makes a Pro workspace, a member with the API-keys permission
// and a confidential app created by that member with grants.
type oauthSetup struct {
	ws            workspace
	member        string
	app           struct{ ID, ClientID, ClientSecret string }
	email, passwd string
}

func newOAuthSetup(t *testing.T, e *e2eEnv, name, grants string) oauthSetup {
	t.Helper()
	var s oauthSetup
	e.admin(t, &s.ws, "workspace", "create", "--name", name, "--plan", "pro", "--rate-multiplier", "100000")
	s.email, s.passwd = "o"+strings.ToLower(s.ws.WorkspaceID)+"@example.com", "correct horse"
	var m struct{ ID string }
	e.admin(t, &m, "member", "create", "--workspace", s.ws.WorkspaceID, "--email", s.email, "--password", s.passwd, "--role", "admin")
	s.member = m.ID
	e.admin(t, &s.app, "oauth-app", "create", "--workspace", s.ws.WorkspaceID, "--name", name, "--type", "confidential",
		"--grants", grants, "--scopes", "contacts:read", "--redirect-uri", "https://app.example.com/cb", "--created-by", s.member)
	return s
}

// A call made with an OAuth access token is recorded in the request log
// with the app and the member it acts as (issue 27 item 5); `admin
// requests` prints both, and a call with an API key has neither.
func TestRequestLogRecordsOAuthAppAndMember(t *testing.T) {
	e := newE2E(t)
	_, base := e.server(t, "serve")
	s := newOAuthSetup(t, e, "request log oauth", "client_credentials")
	st, tok := oauthToken(t, base, s.app.ClientID, s.app.ClientSecret, url.Values{"grant_type": {"client_credentials"}})
	if st != 200 {
		t.Fatalf("client_credentials: %d %v", st, tok)
	}
	if code, body, _ := get(t, base+"/api/v1/contacts", tok["access_token"].(string)); code != 200 {
		t.Fatalf("GET /api/v1/contacts with the token: %d %s", code, body)
	}
	if code, body, _ := get(t, base+"/api/v1/lists", s.ws.APIKey); code != 200 {
		t.Fatalf("GET /api/v1/lists with the key: %d %s", code, body)
	}
	type row struct{ Path, KeyKind, AppID, MemberID string }
	var rows []row
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var out struct{ Requests []row }
		e.admin(t, &out, "requests", "--workspace", s.ws.WorkspaceID)
		if rows = out.Requests; len(rows) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin requests after 60 s: %+v, want the two calls", rows)
		}
	}
	for _, r := range rows {
		switch r.Path {
		case "/api/v1/contacts":
			if r.KeyKind != "oauth" || r.AppID != s.app.ID || r.MemberID != s.member {
				t.Errorf("OAuth call logged as %+v, want app %s and member %s", r, s.app.ID, s.member)
			}
		case "/api/v1/lists":
			if r.KeyKind != "api_key" || r.AppID != "" || r.MemberID != "" {
				t.Errorf("API-key call logged as %+v, want no app or member", r)
			}
		default:
			t.Errorf("unexpected logged call %+v", r)
		}
	}
}
