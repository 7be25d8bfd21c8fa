package transactional_test

import (
	"testing"

	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
)

// TestReportNamesTheAddressInAnySpelling: a provider's hard bounce that
// spells the recipient's internationalised domain in Unicode and upper
// case is about the recipient kept in the ASCII form: the message moves to
// bounced, its contact is BOUNCED and the address is suppressed.
func TestReportNamesTheAddressInAnySpelling(t *testing.T) {
	e := newEnv(t, envOpts{})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	e.contact(ws, "bounce@xn--exmple-cua.test", contacts.Fields{})
	st, ans := e.send(key, map[string]any{"to": "bounce@exämple.test", "subject": "s", "htmlContent": "<p>h</p>"})
	if st != 201 || ans["to"] != "bounce@xn--exmple-cua.test" {
		t.Fatalf("send: %d %v", st, ans)
	}
	id := ans["id"].(string)
	e.waitStatus(key, id, "sent")
	st, rep := e.call("POST", "/api/providers/reports", key, map[string]any{"reports": []any{map[string]any{
		"type": "bounced", "messageId": id, "bounceType": "hard", "reason": "550 5.1.1 user unknown", "email": " BOUNCE@EXÄMPLE.test "}}})
	if res, _ := rep["results"].([]any); st != 200 || len(res) != 1 || res[0].(map[string]any)["applied"] != true {
		t.Fatalf("report: %d %v", st, rep)
	}
	e.waitStatus(key, id, "bounced")
	if s := contactStatus(t, e, ws, "bounce@xn--exmple-cua.test"); s != "BOUNCED" {
		t.Errorf("contact status %s, want BOUNCED", s)
	}
	if st, ans := e.send(key, map[string]any{"to": "bounce@xn--exmple-cua.test", "subject": "s", "htmlContent": "h"}); st != 422 || ans["code"] != "RECIPIENT_SUPPRESSED" {
		t.Errorf("send after the bounce: %d %v", st, ans)
	}
}
