package transactional_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/ingest/transactional"
	"sendstream/schemas"
)

func fieldsOf(m map[string]any) []string {
	var out []string
	for _, f := range m["fields"].([]any) {
		out = append(out, f.(string))
	}
	return out
}

// nothingStored checks that a refused send left no message and published
// nothing.
func (e *env) nothingStored(ws string) {
	e.t.Helper()
	var n int
	if err := e.pg.QueryRow(context.Background(), "SELECT count(*) FROM transactional_messages WHERE workspace_id = $1", ws).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	if n != 0 {
		e.t.Errorf("%d messages stored after refusals", n)
	}
	if got := e.envelopes(schemas.TopicTransactional, schemas.TypeTransactionalSend, ws); len(got) != 0 {
		e.t.Errorf("%d send envelopes published after refusals", len(got))
	}
}

// TestInvalidInputAnswers400WithFields covers "send / validate: 400 with
// fields" and the limits of spec 4.2 and 8.2, for both endpoints.
func TestInvalidInputAnswers400WithFields(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	deep := map[string]any{}
	cur := deep
	for i := 0; i < 32; i++ { // 33 levels with the outer object
		next := map[string]any{}
		cur["x"] = next
		cur = next
	}
	okDeep := map[string]any{}
	cur = okDeep
	for i := 0; i < 31; i++ { // exactly 32 levels
		next := map[string]any{}
		cur["x"] = next
		cur = next
	}
	big := strings.Repeat("x", 256<<10)
	att := func(name string, size int) map[string]any {
		return map[string]any{"filename": name, "content": b64(bytes.Repeat([]byte{'a'}, size))}
	}
	many := make([]any, 21)
	for i := range many {
		many[i] = att("f.txt", 10)
	}
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = uniq("cc")
	}
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"to": "a@example.test", "subject": "Hi", "htmlContent": "<p>x</p>"}
		for k, v := range extra {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	cases := []struct {
		name   string
		body   any
		fields []string
	}{
		{"not an object", "[1,2]", []string{"body"}},
		{"no to", base(map[string]any{"to": nil}), []string{"to"}},
		{"bad to", base(map[string]any{"to": "not an address"}), []string{"to"}},
		{"no content", base(map[string]any{"htmlContent": nil}), []string{"templateId"}},
		{"html without subject", base(map[string]any{"subject": nil}), []string{"subject"}},
		{"subject not a string", base(map[string]any{"subject": 5}), []string{"subject"}},
		{"data not an object", base(map[string]any{"data": []int{1}}), []string{"data"}},
		{"data over 256 KB", base(map[string]any{"data": map[string]any{"s": big}}), []string{"data"}},
		{"data 33 levels", base(map[string]any{"data": deep}), []string{"data"}},
		{"strict not a boolean", base(map[string]any{"strict": "yes"}), []string{"strict"}},
		{"empty externalId", base(map[string]any{"externalId": ""}), []string{"externalId"}},
		{"long externalId", base(map[string]any{"externalId": strings.Repeat("k", 256)}), []string{"externalId"}},
		{"21 attachments", base(map[string]any{"attachments": many}), []string{"attachments"}},
		{"attachment without filename", base(map[string]any{"attachments": []any{map[string]any{"content": b64([]byte("x"))}}}), []string{"attachments[0].filename"}},
		{"attachment bad base64", base(map[string]any{"attachments": []any{map[string]any{"filename": "a.txt", "content": "%%%not base64"}}}), []string{"attachments[0].content"}},
		{"attachment over 3 MB", base(map[string]any{"attachments": []any{att("big.bin", 3<<20+1)}}), []string{"attachments[0].content"}},
		{"attachments over 10 MB", base(map[string]any{"attachments": []any{att("a", 2800<<10), att("b", 2800<<10), att("c", 2800<<10), att("d", 2800<<10)}}), []string{"attachments"}},
		{"attachment path name", base(map[string]any{"attachments": []any{map[string]any{"filename": "../etc/passwd", "content": b64([]byte("x"))}}}), []string{"attachments[0].filename"}},
		{"duplicate content ids", base(map[string]any{"attachments": []any{
			map[string]any{"filename": "a.png", "content": b64([]byte("x")), "contentId": "logo"},
			map[string]any{"filename": "b.png", "content": b64([]byte("y")), "contentId": "logo"}}}), []string{"attachments[1].contentId"}},
		{"11 cc", base(map[string]any{"cc": eleven}), []string{"cc"}},
		{"bad bcc", base(map[string]any{"bcc": []string{"ok@example.test", "nope"}}), []string{"bcc[1]"}},
		{"bad replyTo", base(map[string]any{"replyTo": "x"}), []string{"replyTo"}},
		{"bad fromEmail", base(map[string]any{"fromEmail": "x@"}), []string{"fromEmail"}},
		{"contact not an object", base(map[string]any{"contact": "ada"}), []string{"contact"}},
		{"contact email mismatch", base(map[string]any{"contact": map[string]any{"email": "b@example.test"}}), []string{"contact.email"}},
	}
	for _, c := range cases {
		for _, path := range []string{"/api/v1/transactional/send", "/api/v1/transactional/validate"} {
			st, ans := e.call("POST", path, key, c.body)
			if st != 400 || ans["code"] != "validation_error" || !strings.HasPrefix(ans["error"].(string), "Invalid input") {
				t.Errorf("%s %s: %d %v", c.name, path, st, ans)
				continue
			}
			got := fieldsOf(ans)
			for _, f := range c.fields {
				found := false
				for _, g := range got {
					found = found || g == f
				}
				if !found {
					t.Errorf("%s %s: fields %v lack %s", c.name, path, got, f)
				}
			}
		}
	}
	// The limits themselves are accepted.
	tenCC := eleven[:10]
	st, ans := e.send(key, base(map[string]any{"data": okDeep, "cc": tenCC, "attachments": []any{att("a", 3<<20), att("b", 3<<20), att("c", 3<<20), att("d", 1<<20-4096)}}))
	if st != 201 {
		t.Errorf("send at every limit: %d %v", st, ans)
	}
	if _, raw := e.h.Do("POST", "/api/v1/transactional/send", key, "{not json"); !bytes.Contains(raw, []byte("invalid_json")) {
		t.Errorf("broken JSON: %s", raw)
	}
	var n int
	_ = e.pg.QueryRow(context.Background(), "SELECT count(*) FROM transactional_messages WHERE workspace_id = $1", ws).Scan(&n)
	if n != 1 {
		t.Errorf("%d messages stored, want only the one at the limits", n)
	}
}

// TestRefusalsOfSpec72 covers every send row of spec 7.2 and the
// suppression rule of 3.1: nothing is stored or published for any of them.
func TestRefusalsOfSpec72(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	ctx := context.Background()
	tpl := e.template(ws, transactional.Template{Subject: "Order {{ order.id }}", HTML: "<p>{{ order.id }} {{ note }}</p>", Required: []string{"order.id"}})
	broken := e.template(ws, transactional.Template{Subject: "Hi", HTML: "<p>{% if x %}unclosed</p>"})
	if _, err := e.store.CreatePolicy(ctx, ws, transactional.Policy{Key: "news", Kind: schemas.PolicyMarketing}); err != nil {
		t.Fatal(err)
	}
	// Suppressed addresses: each reason, and contacts bounced or complained.
	for _, r := range []string{"bounced", "complained", "erased"} {
		e.exec("INSERT INTO suppressions (workspace_id, email, reason) VALUES ($1, $2, $3)", ws, r+"@example.test", r)
	}
	for _, s := range []string{contacts.StatusBounced, contacts.StatusComplained} {
		c := e.contact(ws, strings.ToLower(s)+"-contact@example.test", contacts.Fields{})
		e.exec("UPDATE contacts SET status = $1 WHERE id = $2", s, c.ID)
	}
	unsub := e.contact(ws, "unsub@example.test", contacts.Fields{})
	e.exec("UPDATE contacts SET status = 'UNSUBSCRIBED' WHERE id = $1", unsub.ID)

	inline := func(extra map[string]any) map[string]any {
		m := map[string]any{"to": "ok@example.test", "subject": "Hi {{ name }}", "htmlContent": "<p>{{ name }}</p>", "data": map[string]any{"name": "x"}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name   string
		body   map[string]any
		status int
		code   string
		check  func(ans map[string]any) string
	}{
		{"liquid error in body", inline(map[string]any{"htmlContent": "<p>{% for %}</p>"}), 400, "TEMPLATE_ERROR", prefix("Template error:")},
		{"liquid error in subject", inline(map[string]any{"subject": "Hi {% if %}"}), 400, "TEMPLATE_ERROR", prefix("Template error: subject")},
		{"liquid error in stored template", map[string]any{"to": "ok@example.test", "templateId": broken}, 400, "TEMPLATE_ERROR", prefix("Template error:")},
		{"include is refused", inline(map[string]any{"htmlContent": `{% include "/etc/passwd" %}`}), 400, "TEMPLATE_ERROR", prefix("Template error:")},
		{"fromEmail not owned", inline(map[string]any{"fromEmail": "me@not-ours.test"}), 403, "SENDER_DOMAIN_NOT_ALLOWED", nil},
		{"required variable missing", map[string]any{"to": "ok@example.test", "templateId": tpl}, 422, "MISSING_VARIABLES", missing("order.id")},
		{"strict with an unresolved one", map[string]any{"to": "ok@example.test", "templateId": tpl, "strict": true, "data": map[string]any{"order": map[string]any{"id": 1}}}, 422, "MISSING_VARIABLES", missing("note")},
		{"strict inline", inline(map[string]any{"strict": true, "data": map[string]any{}}), 422, "MISSING_VARIABLES", missing("name")},
		{"bounced address", inline(map[string]any{"to": "bounced@example.test"}), 422, "RECIPIENT_SUPPRESSED", contains("suppressed")},
		{"complained address", inline(map[string]any{"to": "complained@example.test"}), 422, "RECIPIENT_SUPPRESSED", contains("suppressed")},
		{"erased address", inline(map[string]any{"to": "erased@example.test"}), 422, "RECIPIENT_SUPPRESSED", contains("erased")},
		{"bounced contact", inline(map[string]any{"to": "bounced-contact@example.test"}), 422, "RECIPIENT_SUPPRESSED", contains("suppressed")},
		{"complained contact", inline(map[string]any{"to": "complained-contact@example.test"}), 422, "RECIPIENT_SUPPRESSED", contains("suppressed")},
		{"unsubscribed under marketing", inline(map[string]any{"to": "unsub@example.test", "sendPolicy": "news"}), 422, "RECIPIENT_SUPPRESSED", contains("unsubscribed")},
		{"marketing without contact", inline(map[string]any{"to": "stranger@example.test", "sendPolicy": "news"}), 422, "MARKETING_NEEDS_CONTACT", nil},
		{"unknown send policy", inline(map[string]any{"sendPolicy": "nope"}), 400, "SEND_POLICY_NOT_FOUND", nil},
		{"unknown template", map[string]any{"to": "ok@example.test", "templateId": "no-such-template"}, 404, "template_not_found", nil},
	}
	for _, c := range cases {
		st, ans := e.send(key, c.body)
		if st != c.status || ans["code"] != c.code {
			t.Errorf("%s: %d %v, want %d %s", c.name, st, ans, c.status, c.code)
			continue
		}
		if _, has := ans["requiredScope"]; has {
			t.Errorf("%s: requiredScope in a transactional error", c.name)
		}
		if c.check != nil {
			if msg := c.check(ans); msg != "" {
				t.Errorf("%s: %s: %v", c.name, msg, ans)
			}
		}
	}
	e.nothingStored(ws)

	// The default Transactional policy delivers to people who unsubscribed
	// from marketing (spec 4.2 rule 3).
	if st, ans := e.send(key, inline(map[string]any{"to": "unsub@example.test"})); st != 201 {
		t.Errorf("transactional send to an unsubscribed contact: %d %v", st, ans)
	}
	// A required variable provided; an unresolved optional one is a warning.
	st, ans := e.send(key, map[string]any{"to": "ok@example.test", "templateId": tpl, "data": map[string]any{"order": map[string]any{"id": 7}}})
	if st != 201 || strings.Join(toStrings(ans["warnings"]), ",") != "note" {
		t.Errorf("send with an unresolved optional variable: %d %v", st, ans)
	}
	// Suppressed copies are dropped; the send goes ahead.
	if st, ans := e.send(key, inline(map[string]any{"cc": []string{"bounced@example.test", "fine@example.test"}})); st != 201 {
		t.Errorf("send with a suppressed cc: %d %v", st, ans)
	}
}

func prefix(p string) func(map[string]any) string {
	return func(ans map[string]any) string {
		if !strings.HasPrefix(ans["error"].(string), p) {
			return "error does not start with " + p
		}
		return ""
	}
}

func contains(s string) func(map[string]any) string {
	return func(ans map[string]any) string {
		if !strings.Contains(ans["error"].(string), s) {
			return "error does not mention " + s
		}
		return ""
	}
}

func missing(want ...string) func(map[string]any) string {
	return func(ans map[string]any) string {
		if strings.Join(toStrings(ans["missing"]), ",") != strings.Join(want, ",") {
			return "missing is not " + strings.Join(want, ",")
		}
		return ""
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestScopesAndRateLimits covers spec 4.1 and 5.1 for the four endpoints.
func TestScopesAndRateLimits(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	_, readKey := e.workspace(ingesttest.WorkspaceOpts{Scopes: []string{"transactional:read"}})
	_, writeKey := e.workspace(ingesttest.WorkspaceOpts{Scopes: []string{"transactional:write"}})
	_, otherKey := e.workspace(ingesttest.WorkspaceOpts{Scopes: []string{"contacts:read"}})
	body := map[string]any{"to": "a@example.test", "subject": "s", "htmlContent": "h"}
	check := func(name string, st int, ans map[string]any, want int) {
		t.Helper()
		if st != want {
			t.Errorf("%s: %d %v, want %d", name, st, ans, want)
		}
		if want == 403 {
			if ans["code"] != "insufficient_scope" {
				t.Errorf("%s: code %v", name, ans["code"])
			}
			if _, has := ans["requiredScope"]; has {
				t.Errorf("%s: requiredScope present on a transactional route", name)
			}
		}
	}
	st, ans := e.send(readKey, body)
	check("send with read scope", st, ans, 403)
	st, ans = e.call("POST", "/api/v1/transactional/validate", otherKey, body)
	check("validate with contacts scope", st, ans, 403)
	st, ans = e.call("GET", "/api/v1/transactional", writeKey, nil)
	check("list with write scope", st, ans, 403)
	st, ans = e.status(otherKey, "x")
	check("status with contacts scope", st, ans, 403)
	st, ans = e.call("GET", "/api/v1/transactional", readKey, nil)
	check("list with read scope", st, ans, 200)
	st, ans = e.call("POST", "/api/v1/transactional/validate", writeKey, body)
	check("validate with write scope", st, ans, 200)

	limit := func(name string, n int, do func() int) {
		t.Helper()
		ingesttest.AwayFromMinuteEnd(t, 20*time.Second) // all n+1 calls in one window
		for i := 0; i < n; i++ {
			if st := do(); st == 429 {
				t.Fatalf("%s: 429 after %d calls, limit is %d", name, i, n)
			}
		}
		if st := do(); st != 429 {
			t.Errorf("%s: call %d answered %d, want 429", name, n+1, st)
		}
	}
	_, k1 := e.workspace(ingesttest.WorkspaceOpts{})
	limit("send", 100, func() int { st, _ := e.send(k1, body); return st })
	// Still in the send limit's window: the later limits may wait for a
	// new minute, which would lift it.
	st, raw := e.h.Do("POST", "/api/v1/transactional/send", k1, body)
	if st != 429 || string(raw) == "" || strings.Contains(string(raw), "code") {
		t.Errorf("429 body carries more than error: %s", raw)
	}
	limit("validate", 100, func() int { st, _ := e.call("POST", "/api/v1/transactional/validate", k1, body); return st })
	limit("list", 60, func() int { st, _ := e.call("GET", "/api/v1/transactional", k1, nil); return st })
	limit("status", 100, func() int { st, _ := e.status(k1, "nope"); return st })
}
