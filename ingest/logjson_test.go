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
		got := appendRequestLog(nil, &rl)
		if string(got) != string(want) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
