package ingest

import (
	"encoding/json"
	"testing"
	"time"

	"sendstream/schemas"
)

func TestAppendRequestLogMatchesEncodingJSON(t *testing.T) {
	cases := []schemas.RequestLog{
		{},
		{At: time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC), Method: "GET", Path: "/api/v1/me", Status: 200, DurationUS: 12, KeyID: "k", KeyKind: "api_key"},
		{At: time.Now().UTC(), Method: "POST", Path: "/x", Status: 422, RequestBody: "{\"a\":\"<b>&\\u2028\u2028\x01\t\n\r\b\f\\\"\xff\"}", ResponseBody: "é😀",
			Truncated: true, IP: "127.0.0.1", UserAgent: "curl/8",
			Produced: schemas.Produced{MessageIDs: []string{"m1", "m2"}, EventIDs: []string{"e"}, JourneyRunIDs: []string{"j"}, ContactIDs: []string{"c"}, Recipient: "a@b.c", ExternalID: "x\"y"}},
		{Produced: schemas.Produced{ExternalID: "only"}},
		{Produced: schemas.Produced{ContactIDs: []string{"c"}}},
	}
	for i, rl := range cases {
		want, _ := json.Marshal(rl)
		got := appendRequestLog(nil, &rl, false, false)
		if string(got) != string(want) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
	// Bodies encoding/json wrote, copied unchecked with reqJSON and respJSON.
	for i, v := range []any{Me{Workspace: MeWorkspace{Name: "<A & B>"}}, []string{"x"}, ErrorBody{Error: "e"}, "a string", 12} {
		body, _ := json.Marshal(v)
		rl := schemas.RequestLog{Method: "GET", RequestBody: schemas.Body(body), ResponseBody: schemas.Body(body)}
		want, _ := json.Marshal(rl)
		if got := appendRequestLog(nil, &rl, true, true); string(got) != string(want) {
			t.Fatalf("JSON body %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestAppendMeMatchesEncodingJSON: the me answer is marked RawJSON, so it
// must be exactly encoding/json's bytes.
func TestAppendMeMatchesEncodingJSON(t *testing.T) {
	for _, p := range []Principal{
		{Workspace: "ws", WorkspaceName: "Acme <&> \u2028 \"q\" é", Plan: "free", KeyID: "k", Kind: "api_key"},
		{Workspace: "ws", KeyID: "k", Kind: "oauth", Scopes: []string{"contacts:read", "events:write"}},
	} {
		scopes := p.Scopes
		if scopes == nil {
			scopes = []string{} // the answer lists no scopes as []
		}
		want, _ := json.Marshal(Me{
			Workspace: MeWorkspace{ID: p.Workspace, Name: p.WorkspaceName, Plan: p.Plan},
			Key:       MeKey{ID: p.KeyID, Kind: p.Kind, Scopes: scopes, FullAccess: len(p.Scopes) == 0},
		})
		if got := appendMe(nil, p); string(got) != string(want) {
			t.Fatalf("appendMe:\n got %s\nwant %s", got, want)
		}
	}
}
