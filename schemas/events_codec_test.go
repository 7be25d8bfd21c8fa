package schemas

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestDecodeEventPayloadMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 678900000, time.UTC)
	payloads := []EventPayload{
		{Event: "a", OccurredAt: at, ReceivedAt: at, Source: "api"},
		{Event: "order.completed", ContactID: "c1", Email: "ann@example.com", GoalType: "purchase", Value: "-49.95",
			Currency: "EUR", ExternalID: "x \"quoted\" \\ é \u2028 <&>", OccurredAt: at, ReceivedAt: at.Add(time.Second),
			Properties: json.RawMessage(`{"a":[1,{"b":"}]"}],"c":null,"d":"\u00e9"}`), Source: "import"},
	}
	for _, want := range payloads {
		b, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeEventPayload(b)
		if err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		var ref EventPayload
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, ref) {
			t.Fatalf("decoded %+v\nencoding/json %+v", got, ref)
		}
	}
	// Whitespace, unknown members, nulls.
	got, err := DecodeEventPayload([]byte(` { "event" : "x" , "extra": {"k":[1,2]}, "email": null, "properties": null,
		"occurredAt": "2025-01-02T03:04:05Z", "n": -1.5e3 } `))
	if err != nil || got.Event != "x" || got.Email != "" || got.Properties != nil || !got.OccurredAt.Equal(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{``, `[]`, `{"event":1}`, `{"event":"x"`, `{"event":"x",}`, `{"occurredAt":"yesterday"}`, `{"properties":{"a":}}`, `{"event":"x"} x`,
		"{\"other\":\"a\\qb\"}", "{\"other\":\"\x01\"}"} {
		if _, err := DecodeEventPayload([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func BenchmarkDecodeEventPayload(b *testing.B) {
	p, _ := json.Marshal(EventPayload{Event: "purchase.completed", ContactID: "01a2013a32f35af336a87db5c4e4f4d7", Email: "u000123@bench.example.com",
		GoalType: "purchase", Value: "49.95", Currency: "USD", ExternalID: "o-1a2b3c4d-000000000123", OccurredAt: time.Now(), ReceivedAt: time.Now(),
		Properties: json.RawMessage(`{"plan":"pro","source":"bench","pad":"xxxxxxxxxxxxxxxx"}`), Source: "api"})
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeEventPayload(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var e EventPayload
			if err := json.Unmarshal(p, &e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestAppendEventRecordedDataMatchesMarshal(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600))
	for _, d := range []EventRecordedData{
		{EventID: "e", Event: "a", ContactID: "c", OccurredAt: at},
		{EventID: "e2", Event: "order", ContactID: "c", Email: "a@b.co", GoalType: "purchase", Value: "-1.5e2",
			Currency: "EUR", ExternalID: "x\"<\u2028\x01\xff", OccurredAt: at, Properties: json.RawMessage(`{"k":[1,"v"]}`)},
	} {
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendEventRecordedData(nil, &d); string(got) != string(want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	}
}
