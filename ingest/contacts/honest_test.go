package contacts_test

import (
	"strings"
	"testing"

	"sendstream/ingest/ingesttest"
)

// TestFailedPublishAfterStoreSaysSo: when the broker cannot take what a
// committed change announces, the 503 says the change was stored, never
// that nothing was done (issue 23: "a 5xx after a committed write is never
// reported as nothing was done"); a call that stored nothing still says
// nothing was done.
func TestFailedPublishAfterStoreSaysSo(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	l := e.list(t, ws, "L", false)
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": "old@example.com"}, nil)
	if err := e.Publisher.Close(); err != nil { // every publish fails from here on
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/api/v1/contacts", map[string]any{"email": "new@example.com"}},
		{"POST", "/api/v1/contacts", map[string]any{"email": "old@example.com", "firstName": "Changed"}},
		{"POST", "/api/v1/lists/" + l.ID + "/subscribe", map[string]any{"email": "sub@example.com"}},
		{"POST", "/api/v1/lists/" + l.ID + "/unsubscribe", map[string]any{"email": "sub@example.com"}},
	} {
		var eb errBody
		e.mustCall(t, 503, tc.method, tc.path, key, tc.body, &eb)
		if strings.Contains(eb.Error, "nothing was done") || !strings.Contains(eb.Error, "stored") {
			t.Errorf("%s %s after a commit: %q", tc.method, tc.path, eb.Error)
		}
	}
	if n := e.contactsOf(t, ws); n != 3 {
		t.Errorf("%d contacts stored, want 3", n)
	}
	// Nothing stored: the answer may say so.
	var eb errBody
	e.mustCall(t, 503, "GET", "/api/v1/contacts", key, nil, &eb)
	if !strings.Contains(eb.Error, "nothing was done") {
		t.Errorf("read-only call: %q", eb.Error)
	}
	e.mustCall(t, 503, "POST", "/api/v1/contacts", key, map[string]any{"email": "old@example.com", "firstName": "Changed"}, &eb)
	if !strings.Contains(eb.Error, "nothing was done") {
		t.Errorf("an upsert that changed nothing: %q", eb.Error)
	}
}
