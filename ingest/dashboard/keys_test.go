package dashboard_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
)

var (
	newKeyRe = regexp.MustCompile(`<code id="new-key">(ss_live_[0-9A-Za-z]+)</code>`)
	keyRowRe = regexp.MustCompile(`data-key-id="([^"]+)"`)
)

// createForm is the keys page's create form.
func createForm(name, expires string, scopes ...string) url.Values {
	return url.Values{"name": {name}, "expires": {expires}, "scope": scopes}
}

func TestPagesWithoutSessionRedirectToLogin(t *testing.T) {
	e := start(t)
	for path, want := range map[string]string{"/": "/login?next=%2F", "/settings/api-keys": "/login?next=%2Fsettings%2Fapi-keys"} {
		resp, _ := e.do("GET", path, "", nil, nil)
		if resp.StatusCode != 303 || resp.Header.Get("Location") != want {
			t.Errorf("GET %s without a session: %d Location %q, want 303 %s", path, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	resp, _ := e.do("GET", "/settings/api-keys", "ss_session=forged", nil, nil)
	if resp.StatusCode != 303 || !strings.HasPrefix(resp.Header.Get("Location"), "/login?") {
		t.Errorf("GET with an unknown session: %d %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, _, cookie := e.member("", "owner", "")
	resp, _ = e.do("GET", "/", cookie, nil, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/settings/api-keys" {
		t.Errorf("GET / signed in: %d %q, want 303 /settings/api-keys", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Signing in from /login?next=/ lands on / and from there on the keys page.
	resp, _ = e.do("POST", "/settings/api-keys", "", createForm("x", ""), nil)
	if resp.StatusCode != 303 || !strings.HasPrefix(resp.Header.Get("Location"), "/login?") {
		t.Errorf("POST without a session: %d %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestKeyShownOnceUsedAndDeleted(t *testing.T) {
	e := start(t)
	ws, _, cookie := e.member("", "member", "api_keys.manage")
	expires := time.Now().UTC().AddDate(0, 0, 30).Format(time.DateOnly)
	resp, body := e.do("POST", "/settings/api-keys", cookie, createForm("ci deploy", expires, "contacts:read"), nil)
	m := newKeyRe.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("create: %d, key shown: %v\n%s", resp.StatusCode, m != nil, body)
	}
	key := m[1]
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the page showing the key has Cache-Control %q, want no-store", cc)
	}
	keys, err := e.h.Store.ListAPIKeys(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, k := range keys {
		if k.Name == "ci deploy" {
			id = k.ID
			day, _ := time.Parse(time.DateOnly, expires)
			if k.ExpiresAt == nil || !k.ExpiresAt.Equal(day.Add(24*time.Hour)) || len(k.Scopes) != 1 || k.Scopes[0] != "contacts:read" {
				t.Errorf("stored key: scopes %v expires %v, want [contacts:read] and the end of %s UTC", k.Scopes, k.ExpiresAt, expires)
			}
		}
	}
	if id == "" {
		t.Fatalf("the created key is not stored: %+v", keys)
	}

	day, _ := time.Parse(time.DateOnly, expires)
	expiresShown := day.AddDate(0, 0, 1).Format(time.DateOnly) + " 00:00 UTC" // valid through the chosen day
	resp, body = e.do("GET", "/settings/api-keys", cookie, nil, nil)
	if resp.StatusCode != 200 || strings.Contains(body, key) || strings.Contains(body, key[len("ss_live_"):]) {
		t.Fatalf("GET after creating: %d, the key is in the page again: %v", resp.StatusCode, strings.Contains(body, key))
	}
	for _, want := range []string{"ci deploy", "ss_live_…" + key[len(key)-4:], "contacts:read", expiresShown, `data-key-id="` + id + `"`, `action="/settings/api-keys/` + id + `/delete"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}

	if got := e.api(key); got != 200 {
		t.Fatalf("GET /api/v1/contacts with the new key: %d, want 200", got)
	}
	resp, _ = e.do("POST", "/settings/api-keys/"+id+"/delete", cookie, url.Values{}, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/settings/api-keys" {
		t.Fatalf("delete: %d %q, want 303 /settings/api-keys", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The store's NOTIFY evicts the key from this process's cache.
	if !e.refused(key) {
		t.Fatal("GET /api/v1/contacts with the deleted key is not refused with 401")
	}
	_, body = e.do("GET", "/settings/api-keys", cookie, nil, nil)
	if strings.Contains(body, id) {
		t.Error("the deleted key is still listed")
	}
	resp, _ = e.do("POST", "/settings/api-keys/"+id+"/delete", cookie, url.Values{}, nil)
	if resp.StatusCode != 404 {
		t.Errorf("deleting it again: %d, want 404", resp.StatusCode)
	}
}

func TestKeysPagePermissions(t *testing.T) {
	e := start(t)
	ws, key := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	keys, err := e.h.Store.ListAPIKeys(context.Background(), ws)
	if err != nil || len(keys) != 1 {
		t.Fatalf("list: %v %v", keys, err)
	}
	id := keys[0].ID
	count := func() int {
		t.Helper()
		k, err := e.h.Store.ListAPIKeys(context.Background(), ws)
		if err != nil {
			t.Fatal(err)
		}
		return len(k)
	}

	calls := []pageCall{
		{"GET", "/settings/api-keys", nil},
		{"POST", "/settings/api-keys", createForm("nope", "")},
		{"POST", "/settings/api-keys/" + id + "/delete", url.Values{}},
	}
	for _, c := range []struct{ role, perms string }{{"member", ""}, {"custom", "webhooks.manage"}} {
		_, _, cookie := e.member(ws, c.role, c.perms)
		e.expectRefused(cookie, c.role+" "+c.perms, calls, "api_keys.manage", "data-key-id")
	}

	_, _, cookie := e.member(ws, "custom", "api_keys.manage")
	if resp, body := e.do("GET", "/settings/api-keys", cookie, nil, nil); resp.StatusCode != 200 || !strings.Contains(body, `action="/settings/api-keys"`) {
		t.Errorf("custom role with api_keys.manage: %d, want 200 with the create form", resp.StatusCode)
	}

	_, _, cookie = e.member(ws, "support", "")
	resp, body := e.do("GET", "/settings/api-keys", cookie, nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `data-key-id="`+id+`"`) {
		t.Fatalf("support staff: %d, want 200 with the list", resp.StatusCode)
	}
	if strings.Contains(body, "<form method=\"post\" action=\"/settings/api-keys") || strings.Contains(body, "/delete") {
		t.Error("support staff see a create or delete form")
	}
	e.expectRefused(cookie, "support staff", calls[1:], "read-only", "data-key-id")
	if n := count(); n != 1 {
		t.Errorf("the refused posts changed the keys: %d keys, want 1", n)
	}
	if got := e.api(key); got != 200 {
		t.Errorf("the key after refused deletions: %d, want 200", got)
	}

	// An owner of another workspace cannot delete this workspace's key.
	_, _, other := e.member("", "owner", "")
	if resp, _ := e.do("POST", "/settings/api-keys/"+id+"/delete", other, url.Values{}, nil); resp.StatusCode != 404 {
		t.Errorf("another workspace's owner deleting: %d, want 404", resp.StatusCode)
	}
	if got := e.api(key); got != 200 {
		t.Errorf("the key after another workspace's delete: %d, want 200", got)
	}
}

func TestKeysFormsRefuseCrossOriginAndBadInput(t *testing.T) {
	e := start(t)
	ws, _, cookie := e.member("", "owner", "")
	before, err := e.h.Store.ListAPIKeys(context.Background(), ws)
	if err != nil {
		t.Fatal(err)
	}
	id := before[0].ID
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "", "Origin": "http://evil.example"},
	} {
		if resp, body := e.do("POST", "/settings/api-keys", cookie, createForm("csrf", ""), h); resp.StatusCode != 403 || strings.Contains(body, "ss_live_") {
			t.Errorf("cross-origin create %v: %d, want 403", h, resp.StatusCode)
		}
		if resp, _ := e.do("POST", "/settings/api-keys/"+id+"/delete", cookie, url.Values{}, h); resp.StatusCode != 403 {
			t.Errorf("cross-origin delete %v: %d, want 403", h, resp.StatusCode)
		}
	}
	yesterday := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)
	for _, f := range []url.Values{
		createForm("bad scope", "", "contacts:read", "contacts:everything"),
		createForm("past", yesterday),
		createForm("not a date", "next week"),
	} {
		resp, body := e.do("POST", "/settings/api-keys", cookie, f, nil)
		if resp.StatusCode != 400 || newKeyRe.MatchString(body) || !strings.Contains(body, `role="alert"`) || !strings.Contains(body, f.Get("name")) {
			t.Errorf("create %v: %d, want 400 with the error and the form kept", f, resp.StatusCode)
		}
	}
	after, err := e.h.Store.ListAPIKeys(context.Background(), ws)
	if err != nil || len(after) != len(before) {
		t.Errorf("refused posts created keys: %d before, %d after (%v)", len(before), len(after), err)
	}
	_, body := e.do("GET", "/settings/api-keys", cookie, nil, nil)
	if len(keyRowRe.FindAllString(body, -1)) != len(before) {
		t.Errorf("the page lists %d keys, want %d", len(keyRowRe.FindAllString(body, -1)), len(before))
	}
}
