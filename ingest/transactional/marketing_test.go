package transactional_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/transactional"
	"sendstream/schemas"
)

// TestMarketingFooterAndOneClickUnsubscribe: a marketing policy adds the
// footer and RFC 8058 headers; the link's page works over HTTP (GET shows a
// confirmation, POST and the one-click POST unsubscribe); the address is
// then refused under marketing but still gets transactional mail.
func TestMarketingFooterAndOneClickUnsubscribe(t *testing.T) {
	e := newEnv(t, envOpts{})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{Name: "Bake <Shop>"})
	ctx := context.Background()
	if _, err := e.store.AddDomain(ctx, ws, transactional.Domain{Domain: "bake.test", Selector: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreatePolicy(ctx, ws, transactional.Policy{Key: "newsletter", Kind: schemas.PolicyMarketing, FromEmail: "news@bake.test", FromName: "Bake News"}); err != nil {
		t.Fatal(err)
	}
	to := "reader@example.test"
	c := e.contact(ws, to, contacts.Fields{FirstName: ptr("Rea")})
	st, ans := e.send(key, map[string]any{"to": to, "sendPolicy": "newsletter", "subject": "Fresh bread, {{ contact.first_name }}",
		"htmlContent": "<html><body><p>New loaves</p></body></html>"})
	if st != 201 || ans["contactId"] != c.ID {
		t.Fatalf("marketing send: %d %v", st, ans)
	}
	m := e.waitMessage(to)
	if m.subject() != "Fresh bread, Rea" || m.header.Get("From") != `"Bake News" <news@bake.test>` {
		t.Errorf("subject %q from %q", m.subject(), m.header.Get("From"))
	}
	lu := m.header.Get("List-Unsubscribe")
	if m.header.Get("List-Unsubscribe-Post") != "List-Unsubscribe=One-Click" || !strings.HasPrefix(lu, "<"+e.h.URL+"/unsubscribe/") {
		t.Fatalf("unsubscribe headers: %q / %q", lu, m.header.Get("List-Unsubscribe-Post"))
	}
	link := strings.Trim(lu, "<>")
	html := string(m.leaf("text/html").body)
	if !strings.Contains(html, `href="`+link+`"`) || !strings.Contains(html, "subscribed to Bake &lt;Shop&gt;") || !strings.Contains(html, "Unsubscribe</a></div></body>") {
		t.Errorf("footer missing from html:\n%s", html)
	}
	if text := string(m.leaf("text/plain").body); !strings.Contains(text, "Unsubscribe: "+link) {
		t.Errorf("footer missing from text:\n%s", text)
	}

	// GET shows a confirmation and changes nothing.
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "<form method=\"post\"") || !strings.Contains(string(page), to) {
		t.Fatalf("GET unsubscribe page: %d %s", resp.StatusCode, page)
	}
	if s := contactStatus(t, e, ws, to); s != "ACTIVE" {
		t.Fatalf("GET changed the contact to %s", s)
	}
	// The page's own form posts back to the same URL.
	action := regexp.MustCompile(`action="([^"]+)"`).FindStringSubmatch(string(page))
	if len(action) != 2 || e.h.URL+action[1] != link {
		t.Errorf("form action %v, link %s", action, link)
	}
	// RFC 8058 one-click: POST with List-Unsubscribe=One-Click.
	resp, err = http.Post(link, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "unsubscribed") {
		t.Fatalf("one-click POST: %d %s", resp.StatusCode, body)
	}
	if s := contactStatus(t, e, ws, to); s != "UNSUBSCRIBED" {
		t.Errorf("contact status after one-click: %s", s)
	}
	// Again (a second click, or the confirmation form): harmless.
	resp, _ = http.PostForm(link, url.Values{"confirm": {"yes"}})
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("repeated unsubscribe: %d", resp.StatusCode)
	}
	st, ans = e.send(key, map[string]any{"to": to, "sendPolicy": "newsletter", "subject": "Again", "htmlContent": "<p>x</p>"})
	if st != 422 || ans["code"] != "RECIPIENT_SUPPRESSED" {
		t.Errorf("marketing send after unsubscribe: %d %v", st, ans)
	}
	st, ans = e.send(key, map[string]any{"to": to, "subject": "Your receipt", "htmlContent": "<p>receipt</p>"})
	if st != 201 {
		t.Errorf("transactional send after unsubscribe: %d %v", st, ans)
	}
	e.waitStatus(key, ans["id"].(string), "sent")

	// A tampered or foreign link is refused.
	for _, bad := range []string{link[:len(link)-3] + "abc", e.h.URL + "/unsubscribe/garbage"} {
		resp, err := http.Post(bad, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("tampered link %s: %d", bad, resp.StatusCode)
		}
	}
}

func contactStatus(t *testing.T, e *env, ws, email string) string {
	t.Helper()
	var s string
	if err := e.pg.QueryRow(context.Background(), "SELECT status FROM contacts WHERE workspace_id = $1 AND email = $2", ws, email).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestContactObject: the contact object creates or updates the recipient
// before sending, never changes its status, renders with its values, lets a
// marketing send through, and when the plan's limit stops the creation the
// email is still sent (spec 4.2 rules 4 and 6).
func TestContactObject(t *testing.T) {
	e := newEnv(t, envOpts{})
	limit := int64(1)
	ws, key := e.workspace(ingesttest.WorkspaceOpts{ContactLimit: &limit})
	ctx := context.Background()
	if err := e.contacts.CreateCustomField(ctx, ws, "plan", contacts.FieldString); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreatePolicy(ctx, ws, transactional.Policy{Key: "promo", Kind: schemas.PolicyMarketing}); err != nil {
		t.Fatal(err)
	}
	// Creates the contact (the one the plan allows), and renders with it.
	st, ans := e.send(key, map[string]any{"to": "new@example.test", "sendPolicy": "promo", "subject": "Hi {{ contact.first_name }} ({{ customField.plan }})",
		"htmlContent": "<p>{{ contact.firstName }}</p>", "contact": map[string]any{"firstName": "Nia", "customFields": map[string]any{"plan": "gold", "unknown": 1}}})
	if st != 201 || ans["contactId"] == nil {
		t.Fatalf("send creating a contact: %d %v", st, ans)
	}
	if m := e.waitMessage("new@example.test"); m.subject() != "Hi Nia (gold)" {
		t.Errorf("subject %q", m.subject())
	}
	if got := e.waitEnvelopes(schemas.TopicContacts, schemas.TypeContactCreated, ws, 1); len(got) != 1 {
		t.Errorf("CONTACT_CREATED envelopes: %d", len(got))
	} else {
		// The payload has the shape POST /v1/contacts publishes: every key
		// of schemas.ContactPayload, metadata null when there is none.
		var p map[string]json.RawMessage
		if err := json.Unmarshal(got[0].Payload, &p); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"contactId", "email", "firstName", "country", "language", "status", "source", "customFields", "metadata", "createdAt", "updatedAt"} {
			if _, ok := p[k]; !ok {
				t.Errorf("CONTACT_CREATED payload lacks %q: %s", k, got[0].Payload)
			}
		}
		if string(p["metadata"]) != "null" || string(p["customFields"]) != `{"plan":"gold"}` || string(p["firstName"]) != `"Nia"` {
			t.Errorf("CONTACT_CREATED payload: %s", got[0].Payload)
		}
	}
	// Updates without changing the status.
	e.exec("UPDATE contacts SET status = 'UNSUBSCRIBED' WHERE workspace_id = $1 AND email = 'new@example.test'", ws)
	st, ans = e.send(key, map[string]any{"to": "new@example.test", "subject": "Hello {{ contact.first_name }}", "htmlContent": "<p>x</p>",
		"contact": map[string]any{"firstName": "Nina"}})
	if st != 201 {
		t.Fatalf("send updating a contact: %d %v", st, ans)
	}
	var first, status string
	if err := e.pg.QueryRow(ctx, "SELECT first_name, status FROM contacts WHERE workspace_id = $1 AND email = 'new@example.test'", ws).Scan(&first, &status); err != nil {
		t.Fatal(err)
	}
	if first != "Nina" || status != "UNSUBSCRIBED" {
		t.Errorf("contact after update: %s %s", first, status)
	}
	// A bad custom field value is invalid input.
	st, ans = e.send(key, map[string]any{"to": "new@example.test", "subject": "x", "htmlContent": "x", "contact": map[string]any{"customFields": map[string]any{"plan": 5}}})
	if st != 400 || !strings.Contains(strings.Join(fieldsOf(ans), ","), "contact.customFields.plan") {
		t.Errorf("bad custom field: %d %v", st, ans)
	}
	// The plan allows one contact: a second new recipient is not created,
	// and the email is still sent, without contactId, even under marketing.
	st, ans = e.send(key, map[string]any{"to": "over@example.test", "sendPolicy": "promo", "subject": "Hi {{ contact.first_name }}", "htmlContent": "<p>x</p>",
		"contact": map[string]any{"firstName": "Oz"}})
	if st != 201 || ans["contactId"] != nil {
		t.Fatalf("send over the contact limit: %d %v", st, ans)
	}
	if m := e.waitMessage("over@example.test"); m.subject() != "Hi Oz" || m.header.Get("List-Unsubscribe") == "" {
		t.Errorf("message over the limit: %q %q", m.subject(), m.header.Get("List-Unsubscribe"))
	}
	var n int
	_ = e.pg.QueryRow(ctx, "SELECT count(*) FROM contacts WHERE workspace_id = $1", ws).Scan(&n)
	if n != 1 {
		t.Errorf("%d contacts, the plan allows 1", n)
	}
}

// TestLanguagesAndTemplateChanges: language picks a translation (exact,
// then the primary subtag), otherwise the contact's language; a changed
// template is rendered in its new version.
func TestLanguagesAndTemplateChanges(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	ctx := context.Background()
	tpl := transactional.Template{Subject: "Hello {{ name }}", HTML: "<p>Hello</p>", Translations: map[string]transactional.Translation{
		"de": {Subject: "Hallo {{ name }}", HTML: "<p>Hallo</p>"}, "fr": {Subject: "Bonjour {{ name }}"}}}
	id := e.template(ws, tpl)
	e.contact(ws, "fr@example.test", contacts.Fields{Language: ptr("fr")})
	validate := func(body map[string]any) map[string]any {
		t.Helper()
		st, ans := e.call("POST", "/api/v1/transactional/validate", key, body)
		if st != 200 {
			t.Fatalf("validate: %d %v", st, ans)
		}
		return ans
	}
	for _, c := range []struct{ lang, to, subject, html string }{
		{"", "x@example.test", "Hello Kim", "<p>Hello</p>"},
		{"de", "x@example.test", "Hallo Kim", "<p>Hallo</p>"},
		{"de-AT", "x@example.test", "Hallo Kim", "<p>Hallo</p>"},
		{"", "fr@example.test", "Bonjour Kim", "<p>Hello</p>"},
		{"de", "fr@example.test", "Hallo Kim", "<p>Hallo</p>"},
		{"es", "x@example.test", "Hello Kim", "<p>Hello</p>"},
	} {
		body := map[string]any{"to": c.to, "templateId": id, "data": map[string]any{"name": "Kim"}}
		if c.lang != "" {
			body["language"] = c.lang
		}
		a := validate(body)
		if a["subject"] != c.subject || a["html"] != c.html {
			t.Errorf("language %q to %s: %v / %v", c.lang, c.to, a["subject"], a["html"])
		}
	}
	// Sends carry the HTML of the language they render in (the envelope
	// takes it encoded from a cache per template version and language).
	for _, lang := range []string{"", "de", "", "de"} {
		if st, ans := e.send(key, map[string]any{"to": "x@example.test", "templateId": id, "language": lang, "data": map[string]any{"name": "Kim"}}); st != 201 {
			t.Fatalf("send in %q: %d %v", lang, st, ans)
		}
	}
	sent := e.envelopes(schemas.TopicTransactional, schemas.TypeTransactionalSend, ws)
	if len(sent) != 4 {
		t.Fatalf("%d send envelopes, want 4", len(sent))
	}
	langs := map[string]int{}
	for _, env := range sent {
		p, err := schemas.DecodeSendPayload(env.Payload)
		langs[p.Language]++
		if want := map[string]string{"": "<p>Hello</p>", "de": "<p>Hallo</p>"}[p.Language]; err != nil || p.HTML != want {
			t.Errorf("send in %q: HTML %q (%v)", p.Language, p.HTML, err)
		}
	}
	if langs[""] != 2 || langs["de"] != 2 {
		t.Errorf("languages of the sends: %v", langs)
	}
	// The request's subject overrides the template's.
	if a := validate(map[string]any{"to": "x@example.test", "templateId": id, "subject": "Custom {{ name }}", "data": map[string]any{"name": "Kim"}}); a["subject"] != "Custom Kim" {
		t.Errorf("subject override: %v", a["subject"])
	}
	// htmlContent wins over templateId.
	if a := validate(map[string]any{"to": "x@example.test", "templateId": id, "subject": "S", "htmlContent": "<b>inline</b>"}); a["html"] != "<b>inline</b>" {
		t.Errorf("htmlContent with templateId: %v", a["html"])
	}
	// A changed template renders its new version at once.
	tpl.Subject, tpl.HTML = "Version two {{ name }}", "<p>v2</p>"
	tpl.Translations = nil
	if _, err := e.store.UpdateTemplate(ctx, ws, id, tpl); err != nil {
		t.Fatal(err)
	}
	if a := validate(map[string]any{"to": "x@example.test", "templateId": id, "data": map[string]any{"name": "Kim"}}); a["subject"] != "Version two Kim" || a["html"] != "<p>v2</p>" {
		t.Errorf("after the change: %v / %v", a["subject"], a["html"])
	}
	st, ans := e.send(key, map[string]any{"to": "x@example.test", "templateId": id, "data": map[string]any{"name": "Kim"}})
	if st != 201 {
		t.Fatalf("send: %d %v", st, ans)
	}
	var v2 []schemas.SendPayload
	for _, env := range e.envelopes(schemas.TopicTransactional, schemas.TypeTransactionalSend, ws) {
		if p, err := schemas.DecodeSendPayload(env.Payload); err == nil && p.TemplateVersion == 2 {
			v2 = append(v2, p)
		}
	}
	if len(v2) != 1 || v2[0].Subject != "Version two {{ name }}" || v2[0].HTML != "<p>v2</p>" {
		t.Errorf("envelope does not carry the new version: %+v", v2)
	}
}

// TestValidateRendersAndStoresNothing covers spec 4.3.
func TestValidateRendersAndStoresNothing(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	id := e.template(ws, transactional.Template{Subject: "Order {{ order.id }} for {{ contact.first_name }}",
		HTML: `<p>{{ note }}</p>{% for i in data.items %}{{ i.name }}{{ forloop.index }}{% endfor %}{{ customField.tier }}`, Required: []string{"order.id"}})
	st, ans := e.call("POST", "/api/v1/transactional/validate", key, map[string]any{"to": "v@example.test", "templateId": id, "externalId": "val-1",
		"data": map[string]any{"order": map[string]any{"id": 9}, "note": "<i>hi</i>"}, "contact": map[string]any{"firstName": "Vi"}})
	if st != 200 {
		t.Fatalf("validate: %d %v", st, ans)
	}
	if ans["valid"] != true || ans["subject"] != "Order 9 for Vi" || ans["html"] != "<p>&lt;i&gt;hi&lt;/i&gt;</p>" {
		t.Errorf("rendering: %v", ans)
	}
	if got := strings.Join(toStrings(ans["variables"]), ","); got != "contact.first_name,customField.tier,data.items,note,order.id" {
		t.Errorf("variables: %s", got)
	}
	if got := strings.Join(toStrings(ans["unresolved"]), ","); got != "customField.tier,data.items" {
		t.Errorf("unresolved: %s", got)
	}
	// Invalid: missing required variable and strict.
	st, ans = e.call("POST", "/api/v1/transactional/validate", key, map[string]any{"to": "v@example.test", "templateId": id, "strict": true, "data": map[string]any{"note": "n"}})
	if st != 200 || ans["valid"] != false || ans["errors"].([]any)[0].(map[string]any)["code"] != "MISSING_VARIABLES" {
		t.Errorf("invalid validate: %d %v", st, ans)
	}
	if got := strings.Join(toStrings(ans["missing"]), ","); got != "contact.first_name,customField.tier,data.items,order.id" {
		t.Errorf("missing: %s", got)
	}
	// Template errors and suppression make it invalid too.
	st, ans = e.call("POST", "/api/v1/transactional/validate", key, map[string]any{"to": "v@example.test", "subject": "s", "htmlContent": "{% if %}"})
	if st != 200 || ans["valid"] != false || ans["subject"] != nil || !strings.HasPrefix(ans["errors"].([]any)[0].(map[string]any)["error"].(string), "Template error:") {
		t.Errorf("validate with a template error: %v", ans)
	}
	// A template that parses but fails while rendering is reported too.
	st, ans = e.call("POST", "/api/v1/transactional/validate", key, map[string]any{"to": "v@example.test", "subject": "s", "htmlContent": `{{ "a" | divided_by: 0 }}`})
	if st != 200 || ans["valid"] != false || ans["errors"].([]any)[0].(map[string]any)["code"] != "TEMPLATE_ERROR" {
		t.Errorf("validate with a render error: %v", ans)
	}
	e.exec("INSERT INTO suppressions (workspace_id, email, reason) VALUES ($1, 'gone@example.test', 'bounced')", ws)
	st, ans = e.call("POST", "/api/v1/transactional/validate", key, map[string]any{"to": "gone@example.test", "subject": "s", "htmlContent": "h"})
	if st != 200 || ans["valid"] != false || ans["errors"].([]any)[0].(map[string]any)["code"] != "RECIPIENT_SUPPRESSED" {
		t.Errorf("validate to a suppressed address: %v", ans)
	}
	// Nothing stored, published or upserted.
	e.nothingStored(ws)
	var n int
	_ = e.pg.QueryRow(context.Background(), "SELECT count(*) FROM contacts WHERE workspace_id = $1", ws).Scan(&n)
	if n != 0 {
		t.Errorf("validate created %d contacts", n)
	}
}
