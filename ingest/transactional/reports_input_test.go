package transactional_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"testing"

	"sendstream/ingest/ingesttest"
)

// TestReportInputRules: the provider report endpoints refuse what their
// OpenAPI description does not take, before anything is applied: a
// bounceType outside hard|soft on any report type (a delivered report with
// bounceType "sideways" was applied), and an SNS delivery in a media type
// other than text/plain or JSON (multipart answered 403 after a signature
// check instead of 415). Found by the bad-input suite.
func TestReportInputRules(t *testing.T) {
	e := newEnv(t, envOpts{noStages: true})
	ws, key := e.workspace(ingesttest.WorkspaceOpts{})
	st, ans := e.send(key, map[string]any{"to": uniq("rep"), "subject": "s", "htmlContent": "<p>h</p>"})
	if st != 201 {
		t.Fatal(st, ans)
	}
	id := ans["id"].(string)
	e.exec("UPDATE transactional_messages SET status = 'sent' WHERE id = $1", id)
	for _, typ := range []string{"delivered", "bounced", "complained"} {
		st, ans := e.call("POST", "/api/providers/reports", key, map[string]any{"reports": []any{
			map[string]any{"type": typ, "messageId": id, "bounceType": "sideways"}}})
		if st != 400 || ans["code"] != "validation_error" || !slices.Equal(fieldsOf(ans), []string{"reports[0].bounceType"}) {
			t.Errorf("%s report with bounceType sideways: %d %v, want 400 naming reports[0].bounceType", typ, st, ans)
		}
	}
	if got := e.pgStatus(id); got != "sent" {
		t.Errorf("refused reports moved the message to %s", got)
	}
	var n int
	if err := e.pg.QueryRow(context.Background(), "SELECT count(*) FROM suppressions WHERE workspace_id = $1", ws).Scan(&n); err != nil || n != 0 {
		t.Errorf("refused reports suppressed %d addresses (%v)", n, err)
	}
	if st, ans := e.call("POST", "/api/providers/reports", key, map[string]any{"reports": []any{
		map[string]any{"type": "delivered", "messageId": id, "bounceType": "soft"}}}); st != 200 {
		t.Errorf("delivered report with bounceType soft: %d %v", st, ans)
	}

	sns := []byte(`{"Type":"Notification","MessageId":"m","TopicArn":"arn:aws:sns:us-east-1:1:t","Message":"{}","Timestamp":"2024-05-01T10:00:00Z","SignatureVersion":"1","Signature":"c2ln","SigningCertURL":"https://example.invalid/c.pem"}`)
	for ct, want := range map[string]int{
		"multipart/form-data; boundary=x": 415, "text/html": 415, "application/x-www-form-urlencoded": 415, "not a type": 415,
		"text/plain; charset=UTF-8": 403, "application/json": 403, "": 403,
	} {
		req, err := http.NewRequest("POST", e.h.URL+"/api/providers/ses", bytes.NewReader(sns))
		if err != nil {
			t.Fatal(err)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, body := e.h.DoRequest(req)
		if resp.StatusCode != want {
			t.Errorf("SNS delivery as %q: %d %s, want %d", ct, resp.StatusCode, body, want)
		}
	}
}
