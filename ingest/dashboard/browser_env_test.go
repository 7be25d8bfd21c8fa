package dashboard_test

import (
	"net/url"
	"strconv"
	"testing"

	"sendstream/ingest/ingesttest/browser"
)

// signedInPage opens start of the site at base in headless Chromium
// without a session, checks that it lands on the sign-in page with
// next=start, signs in as email (adminMember's password) through the
// form and checks that the browser is then on landing.
func signedInPage(t *testing.T, base, start, landing, email string) *browser.Page {
	t.Helper()
	p := browser.Launch(t).NewPage(t)
	p.Navigate(t, base+start)
	if got, want := where(t, p), "/login?next="+url.QueryEscape(start); got != want {
		t.Fatalf("%s without a session landed on %q, want %q", start, got, want)
	}
	p.Eval(t, `document.getElementById("email").value = `+strconv.Quote(email)+`;
		document.getElementById("password").value = "correct horse"; true`, nil)
	p.Submit(t, `document.querySelector('form[action="/login"] button[type=submit]').click()`)
	if got := where(t, p); got != landing {
		t.Fatalf("after signing in the browser is on %q, want %s", got, landing)
	}
	return p
}

// where is the page's path and query.
func where(t *testing.T, p *browser.Page) string {
	t.Helper()
	var path string
	p.Eval(t, `location.pathname + location.search`, &path)
	return path
}
