package events_test

import (
	"encoding/json"
	"slices"
	"testing"

	"sendstream/ingest"
	"sendstream/ingest/ingesttest"
)

// TestEventEmailRule: an event's email is taken by the one email rule: a
// bidi control, an invisible character, a fullwidth local part or a domain
// IDNA refuses is a 400 with fields naming it on /v1/events, the import
// (events[i].email) and /public/events, nothing published; an IDN domain in
// its Unicode spelling finds the contact stored in the ASCII form.
func TestEventEmailRule(t *testing.T) {
	h := start(t)
	ws, key := h.NewWorkspace(t, ingesttest.WorkspaceOpts{})
	cid := contact(t, h, ws, "user@xn--exmple-cua.com")
	for _, addr := range []string{"user\u202e@example.com", "us\u200ber@example.com", "\ufeffuser@example.com",
		"user@exa\u200dmple.com", "ｕｓｅｒ@example.com", "user@xn--zz.com"} {
		for _, c := range []struct {
			path  string
			body  any
			field string
		}{
			{"/api/v1/events", map[string]any{"event": "x", "email": addr}, "email"},
			{"/api/public/events", map[string]any{"event": "x", "email": addr}, "email"},
			{"/api/v1/events/import", map[string]any{"events": []any{map[string]any{"event": "x", "email": addr}}}, "events[0].email"},
		} {
			st, b := h.Do("POST", c.path, key, c.body)
			var e ingest.ErrorBody
			_ = json.Unmarshal(b, &e)
			if st != 400 || e.Code != "validation_error" || !slices.Equal(e.Fields, []string{c.field}) {
				t.Errorf("%s with %q: %d %s, want 400 validation_error fields [%s]", c.path, addr, st, b, c.field)
			}
		}
	}
	if n := len(published(t, h, ws)); n != 0 {
		t.Fatalf("%d events published by refused addresses", n)
	}
	for _, spelling := range []string{"user@exämple.com", "USER@EXÄMPLE.COM", "user@ｅｘäｍｐｌｅ.com"} {
		st, b := h.Do("POST", "/api/v1/events", key, map[string]any{"event": "x", "email": spelling})
		o := decode[outcome](t, b)
		if st != 201 || o.ContactID == nil || *o.ContactID != cid {
			t.Errorf("event for %q: %d %s, want contact %s", spelling, st, b, cid)
		}
	}
}
