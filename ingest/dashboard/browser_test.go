package dashboard_test

import (
	"strconv"
	"strings"
	"testing"

	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

// TestBrowserCreatesUsesAndDeletesAKey is issue 27's check of the keys
// page in headless Chromium: a member made by `admin member create` signs
// in through the form, creates a contacts:read key, reads it once, the
// test uses it, the browser deletes it, and the next call is refused.
func TestBrowserCreatesUsesAndDeletesAKey(t *testing.T) {
	e := start(t)
	ws, _ := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	email := "b" + strings.ToLower(schemas.NewID()) + "@example.com"
	adminMember(t, ws, email, "member", "api_keys.manage")

	p := signedInPage(t, e.h.URL, "/", "/settings/api-keys", email)

	p.Eval(t, `document.getElementById("name").value = "browser key";
		document.querySelector('input[name=scope][value="contacts:read"]').checked = true; true`, nil)
	p.Submit(t, `document.querySelector('form[action="/settings/api-keys"] button[type=submit]').click()`)
	var key string
	p.Eval(t, `(document.getElementById("new-key") || {}).textContent || ""`, &key)
	if !strings.HasPrefix(key, "ss_live_") {
		t.Fatalf("the page after creating shows no key (%q)", key)
	}
	if got := e.api(key); got != 200 {
		t.Fatalf("GET /api/v1/contacts with the key read from the page: %d, want 200", got)
	}

	p.Navigate(t, e.h.URL+"/settings/api-keys")
	var shown bool
	p.Eval(t, `document.documentElement.outerHTML.includes(`+strconv.Quote(key[len("ss_live_"):])+`)`, &shown)
	if shown {
		t.Fatal("the key is shown again on the next visit")
	}
	var rows int
	p.Eval(t, `[...document.querySelectorAll("tr[data-key-id]")].filter(r => r.cells[0].textContent === "browser key").length`, &rows)
	if rows != 1 {
		t.Fatalf("the list shows %d rows named browser key, want 1", rows)
	}
	p.Submit(t, `[...document.querySelectorAll("tr[data-key-id]")].find(r => r.cells[0].textContent === "browser key").querySelector("button").click()`)
	p.Eval(t, `[...document.querySelectorAll("tr[data-key-id]")].filter(r => r.cells[0].textContent === "browser key").length`, &rows)
	if got := where(t, p); got != "/settings/api-keys" || rows != 0 {
		t.Fatalf("after deleting: on %q with %d rows named browser key, want the list without it", got, rows)
	}
	if !e.refused(key) {
		t.Fatal("GET /api/v1/contacts with the deleted key is not refused with 401")
	}

	p.Submit(t, `document.querySelector('form[action="/logout"] button').click()`)
	p.Navigate(t, e.h.URL+"/settings/api-keys")
	if got := where(t, p); got != "/login?next=%2Fsettings%2Fapi-keys" {
		t.Errorf("after signing out the keys page landed on %q, want the sign-in page", got)
	}
	if ex := p.Exceptions(); len(ex) > 0 {
		t.Errorf("uncaught exceptions: %v", ex)
	}
}
