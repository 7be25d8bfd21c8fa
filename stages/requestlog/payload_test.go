package requestlog

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"sendstream/schemas"
)

// fullPayload is a payload with every field set, as ingest encodes it.
func fullPayload(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(schemas.RequestLog{
		At: time.Date(2026, 11, 22, 3, 34, 24, 990963999, time.UTC), Method: "POST", Path: "/api/v1/events",
		Status: 202, DurationUS: 1500, KeyID: "key_1", KeyKind: "api_key",
		RequestBody:  `{"email":"a@example.com","secret":"[REDACTED]","note":"<b>&</b>","tab":"	","é":"☃"}`,
		ResponseBody: `{"id":"ev_1"}`, Truncated: true,
		Produced: schemas.Produced{MessageIDs: []string{"m1", "m2"}, EventIDs: []string{}, ContactIDs: []string{"c1"},
			Recipient: "a@example.com", ExternalID: "x-1"},
		IP: "127.0.0.1", UserAgent: "curl/8.0",
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkPayload(t *testing.T, data []byte) {
	t.Helper()
	var want, got schemas.RequestLog
	werr := json.Unmarshal(data, &want)
	gerr := decodePayload(data, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("error mismatch for %q: json %v, decodePayload %v", data, werr, gerr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decode %q:\n got %#v\nwant %#v", data, got, want)
	}
}

func TestDecodePayloadMatchesEncodingJSON(t *testing.T) {
	inputs := []string{
		string(fullPayload(t)),
		`{"at":"2026-01-02T03:04:05Z","method":"GET","path":"/api/v1/me","status":200,"durationUs":14,"keyId":"k","keyKind":"api_key","produced":{},"ip":"127.0.0.1"}`,
		`{}`,
		`null`,
		`[]`,
		`{"status":"200"}`,
		`{"status":200.0}`,
		`{"status":2e2}`,
		`{"status":-0}`,
		`{"status":007}`,
		`{"durationUs":99999999999999999999}`,
		`{"truncated":null}`,
		`{"truncated":1}`,
		`{"method":null}`,
		`{"Method":"GET"}`,
		`{"method":"GET","method":"PUT"}`,
		`{"unknown":[1,{"a":2}],"method":"GET"}`,
		`{"method":"G\u0045T\n\t\"\\\/\b\f\r"}`,
		`{"method":"\u00e9\u2028\uFFFD"}`,
		`{"method":"\ud83d\ude00"}`,
		`{"method":"\ud83d"}`,
		`{"method":"\udc00x"}`,
		"{\"method\":\"\xff\"}",
		"{\"method\":\"a\\n\xff\"}",
		"{\"method\":\"a\tb\"}",
		`{"method":"\x"}`,
		`{"method":"\u12"}`,
		`{"at":"2026-01-02T03:04:05.5+01:00"}`,
		`{"at":"2026-01-02T03:04:05"}`,
		`{"at":null}`,
		`{"at":"2026-01-02T03:04:05\u005a"}`,
		`{"produced":{"messageIds":["a","b"],"eventIds":[],"journeyRunIds":null,"contactIds":["c"],"recipient":"r","externalId":"x"}}`,
		`{"produced":{"messageIds":["a"]},"produced":{"eventIds":["e"]}}`,
		`{"produced":{"messageIds":["a","b"]},"produced":{"messageIds":["c"]}}`,
		`{"produced":{"messageIds":[1]}}`,
		`{"produced":{"messageIds":["a",]}}`,
		`{"produced":null}`,
		`{"produced":{"unknown":1}}`,
		`{"method":"GET"} `,
		`{"method" :"GET"}`,
		`{"method":"GET",}`,
		`{"method":"GET"}x`,
		`{"method":"GET"`,
		``,
		`{"requestBody":{"a":[1,{"b":"c"}]},"responseBody":[]}`,
		`{"requestBody":{"a": 1 },"responseBody":"{\"x\":1}"}`,
		`{"requestBody":{"a":1}x}`,
		`{"requestBody":{"a":}}`,
		`{"requestBody":{"a":1},"requestBody":"text"}`,
		`{"responseBody":null}`,
		`{"responseBody":12}`,
		`{"responseBody":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`,
	}
	for _, in := range inputs {
		checkPayload(t, []byte(in))
	}
}

func TestDecodePayloadFastPathTaken(t *testing.T) {
	var p schemas.RequestLog
	if !fastPayload(fullPayload(t), &p) {
		t.Fatal("the payload ingest writes went to the slow path")
	}
}

func FuzzDecodePayload(f *testing.F) {
	f.Add(fullPayload(f))
	f.Add([]byte(`{"at":"2026-01-02T03:04:05Z","method":"GET","status":200,"truncated":false,"produced":{"eventIds":["\u00e9"]}}`))
	f.Add([]byte(`{"requestBody":"{\"a\":\"\\u003c\"}","Path":"/x"}`))
	f.Add([]byte(`{"requestBody":{"a":["\u003c",1.5e3,null]},"responseBody":[true]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkPayload(t, data)
	})
}

func BenchmarkDecodePayload(b *testing.B) {
	data := fullPayload(b)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p schemas.RequestLog
			_ = decodePayload(data, &p)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p schemas.RequestLog
			_ = json.Unmarshal(data, &p)
		}
	})
}
