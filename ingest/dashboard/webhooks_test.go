package dashboard_test

import (
	"context"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"sendstream/sinks/webhook"
)

var (
	hookSecretRe = regexp.MustCompile(`<code id="new-webhook-secret" data-endpoint-id="([^"]+)">(whsec_[^<]+)</code>`)
)

// endpointForm is the webhooks page's create form.
func endpointForm(u string, events ...string) url.Values {
	return url.Values{"url": {u}, "event": events}
}

// list returns the workspace's endpoints from the store.
func (e *hooksEnv) list(ws string) []webhook.Endpoint {
	e.t.Helper()
	eps, err := e.endpoints.List(context.Background(), ws)
	if err != nil {
		e.t.Fatal(err)
	}
	return eps
}

// createEndpoint creates an endpoint through the form and returns its id
// and the secret the answer shows.
func (e *hooksEnv) createEndpoint(cookie, u string, events ...string) (id, secret string) {
	e.t.Helper()
	resp, body := e.do("POST", "/settings/webhooks", cookie, endpointForm(u, events...), nil)
	m := hookSecretRe.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil {
		e.t.Fatalf("create %s: %d, secret shown: %v\n%s", u, resp.StatusCode, m != nil, body)
	}
	return m[1], html.UnescapeString(m[2])
}

func TestWebhookEndpointLifecycle(t *testing.T) {
	e := startHooks(t, false)
	ws, _, cookie := e.member("", "admin", "")
	target, _ := receiver(t)
	resp, body := e.do("POST", "/settings/webhooks", cookie, endpointForm(target, "CONTACT_CREATED", "EMAIL_BOUNCED"), nil)
	m := hookSecretRe.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("create: %d, secret shown: %v\n%s", resp.StatusCode, m != nil, body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the page showing the secret has Cache-Control %q, want no-store", cc)
	}
	id, secret := m[1], html.UnescapeString(m[2]) // html/template writes + as &#43;
	eps := e.list(ws)
	if len(eps) != 1 || eps[0].ID != id || eps[0].URL != target || strings.Join(eps[0].Events, ",") != "CONTACT_CREATED,EMAIL_BOUNCED" || !eps[0].Enabled {
		t.Fatalf("stored %+v, want one enabled endpoint %s for %s with both events", eps, id, target)
	}
	if got, err := e.endpoints.Secrets(context.Background(), ws, id, time.Now()); err != nil || len(got) != 1 || got[0] != secret {
		t.Fatalf("the stored secret is not the one shown (%v)", err)
	}

	resp, body = e.do("GET", "/settings/webhooks", cookie, nil, nil)
	if resp.StatusCode != 200 || strings.Contains(html.UnescapeString(body), strings.TrimPrefix(secret, "whsec_")) {
		t.Fatalf("GET after creating: %d, the secret is in the page again: %v", resp.StatusCode, strings.Contains(body, secret))
	}
	for _, want := range []string{target, "CONTACT_CREATED", "EMAIL_BOUNCED", "enabled", `data-endpoint-id="` + id + `"`,
		`href="/settings/webhooks/` + id + `"`, `action="/settings/webhooks/` + id + `/disable"`, `action="/settings/webhooks/` + id + `/rotate-secret"`,
		`action="/settings/webhooks/` + id + `/delete"`, eps[0].CreatedAt.Format("2006-01-02 15:04 UTC")} {
		if !strings.Contains(body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}

	post := func(action string, want int) string {
		t.Helper()
		resp, body := e.do("POST", "/settings/webhooks/"+id+"/"+action, cookie, url.Values{}, nil)
		if resp.StatusCode != want || (want == 303 && resp.Header.Get("Location") != "/settings/webhooks") {
			t.Fatalf("%s: %d %q, want %d", action, resp.StatusCode, resp.Header.Get("Location"), want)
		}
		return body
	}
	post("disable", 303)
	if ep := e.list(ws)[0]; ep.Enabled || ep.DisabledReason != "disabled in the dashboard" {
		t.Fatalf("after disable: enabled %v reason %q", ep.Enabled, ep.DisabledReason)
	}
	_, body = e.do("GET", "/settings/webhooks", cookie, nil, nil)
	if !strings.Contains(body, "disabled</span>: disabled in the dashboard") || !strings.Contains(body, `action="/settings/webhooks/`+id+`/enable"`) {
		t.Error("the list does not show the endpoint disabled with its reason and an Enable button")
	}
	post("enable", 303)
	if ep := e.list(ws)[0]; !ep.Enabled || ep.DisabledReason != "" {
		t.Fatalf("after enable: enabled %v reason %q", ep.Enabled, ep.DisabledReason)
	}

	body = post("rotate-secret", 200)
	m = hookSecretRe.FindStringSubmatch(body)
	if m == nil || m[1] != id || html.UnescapeString(m[2]) == secret || !strings.Contains(body, "24 hours") {
		t.Fatalf("rotate: the new secret is not shown once (%v)", m)
	}
	if got, _ := e.endpoints.Secrets(context.Background(), ws, id, time.Now()); len(got) != 2 || got[0] != html.UnescapeString(m[2]) || got[1] != secret {
		t.Fatalf("after rotating, the secrets that sign are not [new, old]")
	}
	if _, body = e.do("GET", "/settings/webhooks", cookie, nil, nil); strings.Contains(body, m[2]) {
		t.Error("the rotated secret is shown again")
	}

	post("delete", 303)
	if n := len(e.list(ws)); n != 0 {
		t.Fatalf("after delete: %d endpoints", n)
	}
	for _, action := range []string{"delete", "enable", "disable", "rotate-secret"} {
		post(action, 404)
	}
	if resp, _ := e.do("GET", "/settings/webhooks/"+id, cookie, nil, nil); resp.StatusCode != 404 {
		t.Errorf("the deleted endpoint's page: %d, want 404", resp.StatusCode)
	}
}

func TestWebhookCreateRefusesBadInput(t *testing.T) {
	e := startHooks(t, false)
	ws, _, cookie := e.member("", "owner", "")
	target, _ := receiver(t)
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{endpointForm(strings.Replace(target, "https://", "http://", 1), "CONTACT_CREATED"), "https"},
		{endpointForm("", "CONTACT_CREATED"), "URL"},
		{endpointForm(target), "at least one event"},
		{endpointForm(target, "CONTACT_CREATED", "NOT_AN_EVENT"), "NOT_AN_EVENT"},
		{endpointForm("https://10.1.2.3/hooks", "CONTACT_CREATED"), "private"},
		{endpointForm("https://localhost.invalid/hooks", "CONTACT_CREATED"), "does not resolve"},
	} {
		resp, body := e.do("POST", "/settings/webhooks", cookie, c.form, nil)
		if resp.StatusCode != 400 || hookSecretRe.MatchString(body) || !strings.Contains(body, `role="alert"`) || !strings.Contains(body, c.want) {
			t.Errorf("create %v: %d, want 400 with an error naming %q\n%s", c.form, resp.StatusCode, c.want, body)
		}
		if u := c.form.Get("url"); u != "" && !strings.Contains(body, `value="`+u+`"`) {
			t.Errorf("create %v: the URL typed is not kept in the form", c.form)
		}
		if ev := c.form["event"]; len(ev) > 0 && ev[0] == "CONTACT_CREATED" && !strings.Contains(body, `value="CONTACT_CREATED" checked`) {
			t.Errorf("create %v: the events checked are not kept", c.form)
		}
	}
	if n := len(e.list(ws)); n != 0 {
		t.Errorf("refused posts created %d endpoints", n)
	}
	if resp, body := e.do("POST", "/settings/webhooks/no-such-id/replay", cookie, url.Values{"message": {"m"}}, nil); resp.StatusCode != 404 || !strings.Contains(body, "No such webhook endpoint") {
		t.Errorf("replay on an unknown endpoint: %d, want 404", resp.StatusCode)
	}
}

func TestWebhookPagesPermissions(t *testing.T) {
	e := startHooks(t, false)
	ws, _, owner := e.member("", "owner", "")
	target, _ := receiver(t)
	id, secret := e.createEndpoint(owner, target, "CONTACT_CREATED")
	writes := []pageCall{
		{"POST", "/settings/webhooks", endpointForm(target, "CONTACT_CREATED")},
		{"POST", "/settings/webhooks/" + id + "/disable", url.Values{}},
		{"POST", "/settings/webhooks/" + id + "/enable", url.Values{}},
		{"POST", "/settings/webhooks/" + id + "/rotate-secret", url.Values{}},
		{"POST", "/settings/webhooks/" + id + "/delete", url.Values{}},
		{"POST", "/settings/webhooks/" + id + "/replay", url.Values{"message": {"m1"}}},
	}
	reads := []pageCall{{"GET", "/settings/webhooks", nil}, {"GET", "/settings/webhooks/" + id, nil}}
	unchanged := func(who string) {
		t.Helper()
		eps := e.list(ws)
		got, _ := e.endpoints.Secrets(context.Background(), ws, id, time.Now())
		if len(eps) != 1 || !eps[0].Enabled || len(got) != 1 || got[0] != secret {
			t.Errorf("refused posts of %s changed the endpoints: %+v", who, eps)
		}
	}

	// Spec 6: endpoints are registered by an owner or admin (or a role
	// they explicitly granted webhooks.manage, below); a member without
	// it or a custom role with other permissions may not even look.
	for _, c := range []struct{ role, perms string }{{"member", ""}, {"member", "api_keys.manage"}, {"custom", "api_keys.manage"}} {
		_, _, cookie := e.member(ws, c.role, c.perms)
		e.expectRefused(cookie, c.role+" "+c.perms, append(reads, writes...), "owners and admins", target)
		unchanged(c.role)
	}

	_, _, granted := e.member(ws, "custom", "webhooks.manage")
	if resp, body := e.do("GET", "/settings/webhooks", granted, nil, nil); resp.StatusCode != 200 || !strings.Contains(body, `method="post" action="/settings/webhooks`) {
		t.Errorf("custom role granted webhooks.manage: %d, want 200 with the forms", resp.StatusCode)
	}

	_, _, support := e.member(ws, "support", "")
	resp, body := e.do("GET", "/settings/webhooks", support, nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `data-endpoint-id="`+id+`"`) || !strings.Contains(body, "but not change them") {
		t.Fatalf("support staff: %d, want 200 with the list", resp.StatusCode)
	}
	if strings.Contains(body, `method="post" action="/settings/webhooks`) {
		t.Error("support staff see a form that changes endpoints")
	}
	if resp, body := e.do("GET", "/settings/webhooks/"+id, support, nil, nil); resp.StatusCode != 200 || !strings.Contains(body, target) || strings.Contains(body, "/replay") {
		t.Errorf("support staff on the endpoint's page: %d, want 200 without a Replay button", resp.StatusCode)
	}
	e.expectRefused(support, "support staff", writes, "read-only", "whsec_")
	unchanged("support staff")

	// Another workspace's owner sees none of it.
	_, _, other := e.member("", "owner", "")
	if resp, _ := e.do("GET", "/settings/webhooks/"+id, other, nil, nil); resp.StatusCode != 404 {
		t.Errorf("another workspace's owner on the endpoint's page: %d, want 404", resp.StatusCode)
	}
	for _, w := range writes[1:5] {
		if resp, _ := e.do("POST", w.path, other, w.form, nil); resp.StatusCode != 404 {
			t.Errorf("another workspace's owner POST %s: %d, want 404", w.path, resp.StatusCode)
		}
	}
	unchanged("another workspace")

	// Cross-origin posts are refused, whoever signed in.
	for _, h := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "", "Origin": "http://evil.example"}} {
		for _, w := range writes {
			if resp, body := e.do("POST", w.path, owner, w.form, h); resp.StatusCode != 403 || hookSecretRe.MatchString(body) {
				t.Errorf("cross-origin POST %s %v: %d, want 403", w.path, h, resp.StatusCode)
			}
		}
	}
	unchanged("cross-origin posts")

	for _, path := range []string{"/settings/webhooks", "/settings/webhooks/" + id} {
		resp, _ := e.do("GET", path, "", nil, nil)
		if resp.StatusCode != 303 || resp.Header.Get("Location") != "/login?next="+url.QueryEscape(path) {
			t.Errorf("GET %s without a session: %d %q, want 303 to /login and back", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp, _ := e.do("POST", "/settings/webhooks", "", endpointForm(target, "CONTACT_CREATED"), nil); resp.StatusCode != 303 {
		t.Errorf("POST without a session: %d, want 303 to /login", resp.StatusCode)
	}
}
