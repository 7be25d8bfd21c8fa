package dashboard_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

// TestBrowserCreatesAWebhookEndpoint: in headless Chromium an owner signs
// in through the form, opens the webhooks page from the navigation, adds
// an endpoint with the form (URL and an event checkbox), reads its secret
// once, sees the endpoint listed, and no longer sees the secret on the
// next visit; then creates a tracking token the same way.
func TestBrowserCreatesAWebhookEndpoint(t *testing.T) {
	e := startHooks(t, false)
	ws, _ := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	email := "w" + strings.ToLower(schemas.NewID()) + "@example.com"
	adminMember(t, ws, email, "owner", "")
	target, _ := receiver(t)

	p := signedInPage(t, e.h.URL, "/settings/webhooks", "/settings/webhooks", email)

	p.Eval(t, `document.getElementById("url").value = `+strconv.Quote(target)+`;
		document.querySelector('input[name=event][value="CONTACT_CREATED"]').checked = true; true`, nil)
	p.Submit(t, `document.querySelector('form[action="/settings/webhooks"] button[type=submit]').click()`)
	var secret string
	p.Eval(t, `(document.getElementById("new-webhook-secret") || {}).textContent || ""`, &secret)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the page after adding shows no secret (%q)", secret)
	}
	eps := e.list(ws)
	if len(eps) != 1 || eps[0].URL != target {
		t.Fatalf("stored endpoints %+v, want one for %s", eps, target)
	}
	if got, err := e.endpoints.Secrets(context.Background(), ws, eps[0].ID, time.Now()); err != nil || len(got) != 1 || got[0] != secret {
		t.Fatalf("the secret read from the page is not the stored one (%v)", err)
	}

	p.Submit(t, `[...document.querySelectorAll("header nav a")].find(a => a.textContent === "Webhooks").click()`)
	var listed, shown bool
	p.Eval(t, `[...document.querySelectorAll("tr[data-endpoint-id]")].some(r => r.textContent.includes(`+strconv.Quote(target)+`) && r.textContent.includes("CONTACT_CREATED") && r.textContent.includes("enabled"))`, &listed)
	p.Eval(t, `document.documentElement.outerHTML.includes(`+strconv.Quote(strings.TrimPrefix(secret, "whsec_")[:16])+`)`, &shown)
	if got := where(t, p); got != "/settings/webhooks" || !listed || shown {
		t.Fatalf("on %q: endpoint listed %v, secret shown again %v; want the list with the endpoint and without the secret", got, listed, shown)
	}

	p.Navigate(t, e.h.URL+"/settings/tracking-tokens")
	p.Eval(t, `document.getElementById("domains").value = "example.com"; true`, nil)
	p.Submit(t, `document.querySelector('form[action="/settings/tracking-tokens"] button[type=submit]').click()`)
	var tok string
	p.Eval(t, `(document.getElementById("new-token") || {}).textContent || ""`, &tok)
	if !strings.HasPrefix(tok, "ss_track_") || e.track(tok) != 201 {
		t.Fatalf("the tracking token read from the page (%q) does not record an event", tok)
	}
	if ex := p.Exceptions(); len(ex) > 0 {
		t.Errorf("uncaught exceptions: %v", ex)
	}
}
