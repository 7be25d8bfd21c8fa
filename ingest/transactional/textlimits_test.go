package transactional_test

import (
	"slices"
	"strings"
	"testing"

	"sendstream/ingest/ingesttest"
)

// TestLengthLimitsCountCharacters: the limits the send keeps (externalId
// 255, an attachment's contentId 984) count characters (JSON Schema's
// meaning of maxLength), not UTF-8 bytes, on send and validate; one over
// names the field once. Found by the bad-input suite (TestBadInputSuite):
// 255 two-byte characters were refused. The fields the spec gives no
// length (subject, templateId, language, sendPolicy, file names, the
// contact's text fields) have none: a 2,000-character subject, file name
// and contact first name are sent, a long unknown template or policy
// answers as any unknown one does.
func TestLengthLimitsCountCharacters(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	base := func(over map[string]any) map[string]any {
		b := map[string]any{"to": uniq("len"), "subject": "Hi", "htmlContent": "<p>Hi</p>"}
		for k, v := range over {
			b[k] = v
		}
		return b
	}
	file := func(name string) []any {
		return []any{map[string]any{"filename": name, "content": b64([]byte("hello"))}}
	}
	inline := func(cid string) []any {
		return []any{map[string]any{"filename": "a.png", "content": b64([]byte("png")), "contentId": cid}}
	}
	long := strings.Repeat("é<", 1000) // 2,000 characters
	for _, path := range []string{"/api/v1/transactional/validate", "/api/v1/transactional/send"} {
		for _, c := range []struct {
			name string
			over map[string]any
		}{
			{"subject of 2,000 characters", map[string]any{"subject": long}},
			{"contact text fields of 2,000 characters", map[string]any{"contact": map[string]any{"firstName": long, "country": long, "language": long}, "language": long}},
			{"externalId of 255 two-byte characters", map[string]any{"externalId": strings.Repeat("ü", 254) + path[len(path)-1:]}},
			{"file name of 2,000 characters", map[string]any{"attachments": file(long + ".txt")}},
			{"contentId of 984 characters", map[string]any{"attachments": inline(strings.Repeat("c", 984))}},
		} {
			if st, m := e.call("POST", path, key, base(c.over)); st != 200 && st != 201 {
				t.Errorf("%s: %s answered %d %v", path, c.name, st, m)
			}
		}
		for _, c := range []struct {
			field string
			over  map[string]any
		}{
			{"externalId", map[string]any{"externalId": strings.Repeat("ü", 256)}},
			{"attachments[0].contentId", map[string]any{"attachments": inline(strings.Repeat("c", 985))}},
		} {
			st, m := e.call("POST", path, key, base(c.over))
			if st != 400 || m["code"] != "validation_error" || !slices.Equal(fieldsOf(m), []string{c.field}) {
				t.Errorf("%s: %s one over: %d %v, want 400 validation_error naming it once", path, c.field, st, m)
			}
		}
		// validate answers 200 valid:false with the error a send would get.
		refused := func(st int, m map[string]any) (int, any) {
			if errs, ok := m["errors"].([]any); ok && st == 200 && len(errs) == 1 {
				e, _ := errs[0].(map[string]any)
				return int(e["status"].(float64)), e["code"]
			}
			return st, m["code"]
		}
		if st, code := refused(e.call("POST", path, key, map[string]any{"to": uniq("len"), "templateId": strings.Repeat("t", 1000)})); st != 404 || code != "template_not_found" {
			t.Errorf("%s: a 1,000-character unknown templateId: %d %v, want 404 template_not_found", path, st, code)
		}
		if st, code := refused(e.call("POST", path, key, base(map[string]any{"sendPolicy": strings.Repeat("p", 1000)}))); st != 400 || code != "SEND_POLICY_NOT_FOUND" {
			t.Errorf("%s: a 1,000-character unknown sendPolicy: %d %v, want 400 SEND_POLICY_NOT_FOUND", path, st, code)
		}
	}
	var n int
	if err := e.pg.QueryRow(t.Context(), "SELECT count(*) FROM transactional_messages WHERE workspace_id = $1", ws).Scan(&n); err != nil || n != 5 {
		t.Errorf("stored %d messages (%v), want the 5 accepted sends", n, err)
	}
	var first string
	if err := e.pg.QueryRow(t.Context(), "SELECT first_name FROM contacts WHERE workspace_id = $1 AND first_name IS NOT NULL", ws).Scan(&first); err != nil || first != long {
		t.Errorf("the contact's first name: %d bytes stored (%v), want the %d sent", len(first), err, len(long))
	}
}

// TestSendContactGrowthIsBounded: a send whose contact object writes a
// large value into an existing contact is checked with what the contact
// already carries, as an upsert is: one that would take the contact's
// events past contacts.MaxContactValues answers 400 naming the field, and
// nothing is sent. (The large contact is written in SQL, so no 60 MB event
// is published.)
func TestSendContactGrowthIsBounded(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	to := uniq("grow")
	for _, q := range []string{
		`INSERT INTO custom_fields (workspace_id, key, type) VALUES ($1, 'b', 'string')`,
		`INSERT INTO contacts (id, workspace_id, seq, email, custom_fields)
			VALUES ('c_' || md5($2), $1, 1, $2, jsonb_build_object('a', repeat('<', 10500000)))`, // 63 MB as published
	} {
		args := []any{ws}
		if strings.Contains(q, "$2") {
			args = append(args, to)
		}
		if _, err := e.pg.Exec(t.Context(), q, args...); err != nil {
			t.Fatal(err)
		}
	}
	st, m := e.call("POST", "/api/v1/transactional/send", key, map[string]any{
		"to": to, "subject": "Hi", "htmlContent": "<p>Hi</p>",
		"contact": map[string]any{"customFields": map[string]any{"b": strings.Repeat("&", 1<<20)}},
	})
	if st != 400 || m["code"] != "validation_error" || !slices.Equal(fieldsOf(m), []string{"contact.customFields.b"}) {
		t.Fatalf("a 6 MB custom field on a 63 MB contact: %d %.300v", st, m)
	}
	var n int
	if err := e.pg.QueryRow(t.Context(), "SELECT count(*) FROM transactional_messages WHERE workspace_id = $1", ws).Scan(&n); err != nil || n != 0 {
		t.Errorf("stored %d messages (%v), want none", n, err)
	}
}
