package transactional_test

import (
	"fmt"
	"testing"

	"sendstream/ingest/ingesttest"
)

// TestListParametersMustBeValid: a query parameter of GET /v1/transactional
// that is present must be valid, even when empty (issue 23, defect 5): it
// is never read as its default or as "no filter".
func TestListParametersMustBeValid(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	_, key := e.workspace(ingesttest.WorkspaceOpts{})
	for i := 0; i < 2; i++ {
		if st, ans := e.send(key, map[string]any{"to": "a@example.test", "subject": "s", "htmlContent": "h"}); st != 201 {
			t.Fatal(st, ans)
		}
	}
	for _, tc := range []struct{ q, code, field string }{
		{"limit=", "validation_error", "limit"},
		{"limit", "validation_error", "limit"},
		{"limit=%2B5", "validation_error", "limit"},
		{"limit=+5", "validation_error", "limit"},
		{"limit=-1", "validation_error", "limit"},
		{"limit=1.0", "validation_error", "limit"},
		{"limit=99999999999999999999", "validation_error", "limit"},
		{"status=", "validation_error", "status"},
		{"to=", "validation_error", "to"},
		{"to=%20", "validation_error", "to"},
		{"externalId=", "validation_error", "externalId"},
		{"before=", "invalid_cursor", "before"},
	} {
		st, ans := e.call("GET", "/api/v1/transactional?"+tc.q, key, nil)
		if st != 400 || ans["code"] != tc.code || fmt.Sprint(ans["fields"]) != fmt.Sprint([]any{tc.field}) {
			t.Errorf("%s: %d %v, want 400 %s [%s]", tc.q, st, ans, tc.code, tc.field)
		}
	}
	st, ans := e.call("GET", "/api/v1/transactional?limit=01", key, nil)
	if st != 200 || len(ans["messages"].([]any)) != 1 || ans["nextBefore"] == nil {
		t.Errorf("limit=01: %d %v", st, ans)
	}
}
