package dashboard_test

import (
	"testing"

	"sendstream/ingest/dashboard"
	"sendstream/ingest/ingesttest"
)

// TestUnwiredPagesAnswerUnavailable: a page whose store the process did
// not wire (Deps left nil) answers a signed-in member 503, never a 500
// from a nil store (serveDashboard always wires the keys store).
func TestUnwiredPagesAnswerUnavailable(t *testing.T) {
	e := serveDashboard(t, dashboard.Deps{}, nil)
	ws, _ := e.h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	_, _, cookie := e.member(ws, "owner", "")
	for _, path := range []string{"/settings/webhooks", "/settings/webhooks/x",
		"/settings/oauth-apps", "/settings/connected-apps", "/logs/requests", "/logs/messages"} {
		if resp, body := e.do("GET", path, cookie, nil, nil); resp.StatusCode != 503 {
			t.Errorf("GET %s with nothing wired: %d %.100s, want 503", path, resp.StatusCode, body)
		}
	}
}
