package dashboard_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"sendstream/ingest/auth"
)

var (
	newTokenRe = regexp.MustCompile(`<code id="new-token">(ss_track_[0-9A-Za-z]+)</code>`)
	tokenRowRe = regexp.MustCompile(`data-token-id="([^"]+)"`)
)

// tokens lists the workspace's tracking tokens from the store.
func (e *hooksEnv) tokens(ws string) []auth.TrackingToken {
	e.t.Helper()
	toks, err := e.h.Store.ListTrackingTokens(context.Background(), ws)
	if err != nil {
		e.t.Fatal(err)
	}
	return toks
}

// trackRefused waits up to ten seconds for the token to be refused with
// 401 (the deletion's NOTIFY reaches the cache asynchronously; the TTL is
// a minute).
func (e *hooksEnv) trackRefused(token string) bool {
	e.t.Helper()
	return eventuallyTrue(func() bool { return e.track(token) == 401 })
}

func TestTrackingTokenShownOnceUsedAndDeleted(t *testing.T) {
	e := startHooks(t, false)
	ws, _, cookie := e.member("", "member", "") // members manage tracking tokens by default
	resp, body := e.do("POST", "/settings/tracking-tokens", cookie, url.Values{"domains": {"Example.com, shop.example.org"}}, nil)
	m := newTokenRe.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("create: %d, token shown: %v\n%s", resp.StatusCode, m != nil, body)
	}
	tok := m[1]
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the page showing the token has Cache-Control %q, want no-store", cc)
	}
	toks := e.tokens(ws)
	if len(toks) != 1 || len(toks[0].Domains) != 2 || toks[0].Domains[0] != "example.com" || toks[0].Domains[1] != "shop.example.org" {
		t.Fatalf("stored tokens %+v, want one for example.com and shop.example.org", toks)
	}
	id := toks[0].ID

	resp, body = e.do("GET", "/settings/tracking-tokens", cookie, nil, nil)
	if resp.StatusCode != 200 || strings.Contains(body, tok[len("ss_track_"):len(tok)-4]) {
		t.Fatalf("GET after creating: %d, the token is in the page again: %v", resp.StatusCode, strings.Contains(body, tok))
	}
	for _, want := range []string{"ss_track_…" + tok[len(tok)-4:], "example.com", "shop.example.org", `data-token-id="` + id + `"`,
		`action="/settings/tracking-tokens/` + id + `/delete"`, "UTC"} {
		if !strings.Contains(body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}

	if st := e.track(tok); st != 201 {
		t.Fatalf("POST /api/public/events with the new token: %d, want 201", st)
	}
	resp, _ = e.do("POST", "/settings/tracking-tokens/"+id+"/delete", cookie, url.Values{}, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/settings/tracking-tokens" {
		t.Fatalf("delete: %d %q, want 303 /settings/tracking-tokens", resp.StatusCode, resp.Header.Get("Location"))
	}
	if !e.trackRefused(tok) {
		t.Fatal("POST /api/public/events with the deleted token is not refused with 401")
	}
	if _, body = e.do("GET", "/settings/tracking-tokens", cookie, nil, nil); strings.Contains(body, id) {
		t.Error("the deleted token is still listed")
	}
	if resp, _ = e.do("POST", "/settings/tracking-tokens/"+id+"/delete", cookie, url.Values{}, nil); resp.StatusCode != 404 {
		t.Errorf("deleting it again: %d, want 404", resp.StatusCode)
	}
}

func TestTrackingTokensPagePermissions(t *testing.T) {
	e := startHooks(t, false)
	ws, _, owner := e.member("", "owner", "")
	resp, body := e.do("POST", "/settings/tracking-tokens", owner, url.Values{"domains": {""}}, nil)
	m := newTokenRe.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("owner creating: %d", resp.StatusCode)
	}
	tok, id := m[1], e.tokens(ws)[0].ID
	if _, body := e.do("GET", "/settings/tracking-tokens", owner, nil, nil); !strings.Contains(body, "any origin") {
		t.Error("a token without domains is not shown as allowing any origin")
	}

	calls := []pageCall{
		{"GET", "/settings/tracking-tokens", nil},
		{"POST", "/settings/tracking-tokens", url.Values{"domains": {"x.com"}}},
		{"POST", "/settings/tracking-tokens/" + id + "/delete", url.Values{}},
	}
	for _, c := range []struct{ role, perms string }{{"custom", ""}, {"custom", "api_keys.manage,webhooks.manage"}} {
		_, _, cookie := e.member(ws, c.role, c.perms)
		e.expectRefused(cookie, c.role+" "+c.perms, calls, "tracking_tokens.manage", "data-token-id")
	}
	_, _, custom := e.member(ws, "custom", "tracking_tokens.manage")
	if resp, body := e.do("GET", "/settings/tracking-tokens", custom, nil, nil); resp.StatusCode != 200 || !strings.Contains(body, `action="/settings/tracking-tokens"`) {
		t.Errorf("custom role with tracking_tokens.manage: %d, want 200 with the create form", resp.StatusCode)
	}

	_, _, support := e.member(ws, "support", "")
	resp, body = e.do("GET", "/settings/tracking-tokens", support, nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `data-token-id="`+id+`"`) {
		t.Fatalf("support staff: %d, want 200 with the list", resp.StatusCode)
	}
	if strings.Contains(body, `method="post" action="/settings/tracking-tokens`) {
		t.Error("support staff see a create or delete form")
	}
	e.expectRefused(support, "support staff", calls[1:], "read-only", "data-token-id")
	// Another workspace's owner cannot delete it.
	_, _, other := e.member("", "owner", "")
	if resp, _ := e.do("POST", "/settings/tracking-tokens/"+id+"/delete", other, url.Values{}, nil); resp.StatusCode != 404 {
		t.Errorf("another workspace's owner deleting: %d, want 404", resp.StatusCode)
	}
	if n := len(e.tokens(ws)); n != 1 {
		t.Errorf("the refused posts changed the tokens: %d, want 1", n)
	}
	if st := e.track(tok); st != 201 {
		t.Errorf("the token after refused deletions: %d, want 201", st)
	}
}

func TestTrackingTokenFormsRefuseCrossOriginAndBadInput(t *testing.T) {
	e := startHooks(t, false)
	ws, _, cookie := e.member("", "owner", "")
	if resp, _ := e.do("POST", "/settings/tracking-tokens", cookie, url.Values{"domains": {""}}, nil); resp.StatusCode != 200 {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	id := e.tokens(ws)[0].ID
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "", "Origin": "http://evil.example"},
	} {
		if resp, body := e.do("POST", "/settings/tracking-tokens", cookie, url.Values{"domains": {""}}, h); resp.StatusCode != 403 || newTokenRe.MatchString(body) {
			t.Errorf("cross-origin create %v: %d, want 403", h, resp.StatusCode)
		}
		if resp, _ := e.do("POST", "/settings/tracking-tokens/"+id+"/delete", cookie, url.Values{}, h); resp.StatusCode != 403 {
			t.Errorf("cross-origin delete %v: %d, want 403", h, resp.StatusCode)
		}
	}
	for _, typed := range []string{"https://example.com", "example.com:8080", "example.com/shop"} {
		resp, body := e.do("POST", "/settings/tracking-tokens", cookie, url.Values{"domains": {"ok.example.org, " + typed}}, nil)
		if resp.StatusCode != 400 || newTokenRe.MatchString(body) || !strings.Contains(body, `role="alert"`) ||
			!strings.Contains(body, "not a domain name") || !strings.Contains(body, `value="ok.example.org, `+typed+`"`) {
			t.Errorf("create with %q: %d, want 400 with the error and the form kept\n%s", typed, resp.StatusCode, body)
		}
	}
	if n := len(e.tokens(ws)); n != 1 {
		t.Errorf("refused posts created tokens: %d, want 1", n)
	}
	_, body := e.do("GET", "/settings/tracking-tokens", cookie, nil, nil)
	if n := len(tokenRowRe.FindAllString(body, -1)); n != 1 {
		t.Errorf("the page lists %d tokens, want 1", n)
	}
	resp, _ := e.do("GET", "/settings/tracking-tokens", "", nil, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/login?next=%2Fsettings%2Ftracking-tokens" {
		t.Errorf("GET without a session: %d %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = e.do("POST", "/settings/tracking-tokens", "", url.Values{"domains": {""}}, nil)
	if resp.StatusCode != 303 || !strings.HasPrefix(resp.Header.Get("Location"), "/login?") {
		t.Errorf("POST without a session: %d %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
}
