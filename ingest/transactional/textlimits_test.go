package transactional_test

import (
	"slices"
	"strings"
	"testing"

	"sendstream/ingest/ingesttest"
)

// TestLengthLimitsCountCharacters: the document's maxLength of subject,
// externalId and attachment file names counts characters (JSON Schema's
// meaning), not UTF-8 bytes, on send and validate; one over names the field
// once. Found by the bad-input suite (TestBadInputSuite): 255 two-byte
// characters were refused.
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
	for _, path := range []string{"/api/v1/transactional/validate", "/api/v1/transactional/send"} {
		for _, c := range []struct {
			name string
			over map[string]any
		}{
			{"subject of 998 two-byte characters", map[string]any{"subject": strings.Repeat("é", 998)}},
			{"externalId of 255 two-byte characters", map[string]any{"externalId": strings.Repeat("ü", 254) + path[len(path)-1:]}},
			{"file name of 255 two-byte characters", map[string]any{"attachments": file(strings.Repeat("é", 251) + ".txt")}},
		} {
			if st, m := e.call("POST", path, key, base(c.over)); st != 200 && st != 201 {
				t.Errorf("%s: %s answered %d %v", path, c.name, st, m)
			}
		}
		for _, c := range []struct {
			field string
			over  map[string]any
		}{
			{"subject", map[string]any{"subject": strings.Repeat("é", 999)}},
			{"externalId", map[string]any{"externalId": strings.Repeat("ü", 256)}},
			{"attachments[0].filename", map[string]any{"attachments": file(strings.Repeat("é", 252) + ".txt")}},
		} {
			st, m := e.call("POST", path, key, base(c.over))
			if st != 400 || m["code"] != "validation_error" || !slices.Equal(fieldsOf(m), []string{c.field}) {
				t.Errorf("%s: %s one over: %d %v, want 400 validation_error naming it once", path, c.field, st, m)
			}
		}
	}
	var n int
	if err := e.pg.QueryRow(t.Context(), "SELECT count(*) FROM transactional_messages WHERE workspace_id = $1", ws).Scan(&n); err != nil || n != 3 {
		t.Errorf("stored %d messages (%v), want the 3 accepted sends", n, err)
	}
}
