package contacts_test

import (
	"reflect"
	"strings"
	"testing"

	"sendstream/ingest/ingesttest"
)

// TestPresentParametersMustBeValid: a query parameter of GET /v1/contacts
// that is present must be valid, even when empty (issue 23, defect 5): it
// is never read as its default. Integers are plain decimal digits.
func TestPresentParametersMustBeValid(t *testing.T) {
	e := start(t)
	_, key := e.ws(t, ingesttest.WorkspaceOpts{})
	for _, email := range []string{"a@example.com", "b@example.com"} {
		e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": email}, nil)
	}
	for _, tc := range []struct {
		q, code string
		fields  []string
	}{
		{"page=", "validation_error", []string{"page"}},
		{"page", "validation_error", []string{"page"}},
		{"limit=", "validation_error", []string{"limit"}},
		{"limit", "validation_error", []string{"limit"}},
		{"limit=%2B5", "validation_error", []string{"limit"}}, // "+5"
		{"limit=+5", "validation_error", []string{"limit"}},   // " 5"
		{"limit=5%20", "validation_error", []string{"limit"}},
		{"limit=0x10", "validation_error", []string{"limit"}},
		{"limit=1e1", "validation_error", []string{"limit"}},
		{"page=%2B1", "validation_error", []string{"page"}},
		{"page=-0", "validation_error", []string{"page"}},
		{"page=99999999999999999999", "validation_error", []string{"page"}},
		{"page=&limit=", "validation_error", []string{"page", "limit"}},
		{"status=", "invalid_status", []string{"status"}},
		{"status=%20", "invalid_status", []string{"status"}},
		{"listId=", "validation_error", []string{"listId"}},
		{"listId=&status=ACTIVE", "validation_error", []string{"listId"}},
	} {
		var eb errBody
		e.mustCall(t, 400, "GET", "/api/v1/contacts?"+tc.q, key, nil, &eb)
		if eb.Code != tc.code || !reflect.DeepEqual(eb.Fields, tc.fields) || eb.Error == "" {
			t.Errorf("%s: %+v, want %s %v", tc.q, eb, tc.code, tc.fields)
		}
	}

	// Valid values, including leading zeros and the largest page number:
	// a page past the end is empty, not an error.
	var p pageResp
	e.mustCall(t, 200, "GET", "/api/v1/contacts?limit=01&page=002", key, nil, &p)
	if p.Pagination.Limit != 1 || p.Pagination.Page != 2 || len(p.Contacts) != 1 || p.Pagination.Total != 2 {
		t.Errorf("limit=01&page=002: %+v", p)
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts?page=9223372036854775807&limit=100", key, nil, &p)
	if len(p.Contacts) != 0 || p.Pagination.Page != 9223372036854775807 || p.Pagination.Total != 2 {
		t.Errorf("largest page: %+v", p)
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts?page=1000000001", key, nil, &p)
	if len(p.Contacts) != 0 || p.Pagination.Page != 1000000001 {
		t.Errorf("page past 1e9: %+v", p)
	}
}

// TestLongContactIDIsUnknownNot400: a contactId has no length rule (64
// characters answered 400): one that names no contact is 404
// contact_not_found on subscribe and nothing to remove on unsubscribe.
func TestLongContactIDIsUnknownNot400(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	l := e.list(t, ws, "L", false)
	long := strings.Repeat("c", 5000)
	var eb errBody
	e.mustCall(t, 404, "POST", "/api/v1/lists/"+l.ID+"/subscribe", key, map[string]any{"contactId": long}, &eb)
	if eb.Code != "contact_not_found" || !reflect.DeepEqual(eb.Fields, []string{"contactId"}) {
		t.Errorf("subscribe: %+v", eb)
	}
	var u struct {
		Removed   bool    `json:"removed"`
		ContactID *string `json:"contactId"`
	}
	e.mustCall(t, 200, "POST", "/api/v1/lists/"+l.ID+"/unsubscribe", key, map[string]any{"contactId": long}, &u)
	if u.Removed {
		t.Errorf("unsubscribe: %+v", u)
	}
}
