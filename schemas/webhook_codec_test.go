package schemas

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// webhookDeliveryPayloads are delivery payloads in the canonical shape and
// around it (escapes, nulls, other types, unknown and differently cased
// keys), each decoded as json.Unmarshal decodes it.
var webhookDeliveryPayloads = []string{
	`{"messageId":"m1","event":"CONTACT_CREATED","targetKind":"endpoint","targetId":"t1","url":"https://x/y","attempt":3,"throttled":2,"firstAt":"2026-11-26T12:00:00.123456789Z","body":{"id":"m1","data":{"a":[1,2,{"b":"c\"d"}]}},"replay":true}`,
	`{"messageId":"m1","event":"E","targetKind":"k","targetId":"t","url":"u","attempt":1,"firstAt":"2026-11-26T12:00:00+02:00","body":{}}`,
	`{"messageId":"m\u00e9\n","event":"E","body":{"x":1}}`,
	`{"MessageId":"m1","body":{"x":1}}`,
	`{"messageId":"m1","other":5,"body":{"x":1}}`,
	`{"messageId":null,"attempt":null,"firstAt":null,"body":null}`,
	`{"messageId":"m1","body":[1,2]}`,
	`{"messageId":"m1","body":"s"}`,
	`{"messageId":"m1","messageId":"m2","body":{"a":1},"body":{"b":2}}`,
	`{"attempt":1.5}`,
	`{"attempt":"1"}`,
	`{"attempt":99999999999999999999}`,
	`{"firstAt":"not a time"}`,
	`{"replay":"yes"}`,
	` {"messageId":"m1"} `,
	`{}`,
	`[]`,
	`"s"`,
	`null`,
}

func TestDecodeWebhookDeliveryMatchesEncodingJSON(t *testing.T) {
	for _, p := range webhookDeliveryPayloads {
		var want WebhookDelivery
		wantErr := json.Unmarshal([]byte(p), &want)
		got, err := DecodeWebhookDelivery([]byte(p))
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: error %v, encoding/json %v", p, err, wantErr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %+v\n want %+v", p, got, want)
		}
	}
}

func TestDecodeWebhookAttemptMatchesEncodingJSON(t *testing.T) {
	for _, p := range []string{
		`{"messageId":"m1","event":"E","targetKind":"k","targetId":"t","url":"u","attempt":2,"throttled":1,"outcome":"retry","statusCode":500,"durationMs":12.345,"error":"boom","nextAttemptAt":"2026-11-26T12:05:00Z","at":"2026-11-26T12:00:00.5Z","replay":true}`,
		`{"messageId":"m1","attempt":1,"outcome":"ok","durationMs":1e-7,"at":"2026-11-26T12:00:00Z"}`,
		`{"messageId":"m1","nextAttemptAt":null,"statusCode":null}`,
		`{"messageId":"m1","error":"a\"b\u2028"}`,
		`{"messageId":"m1","durationMs":"1"}`,
		`{"messageId":"m1","statusCode":2.5}`,
		`{"Outcome":"ok"}`,
		`{}`,
		`[1]`,
	} {
		var want WebhookAttempt
		wantErr := json.Unmarshal([]byte(p), &want)
		got, err := DecodeWebhookAttempt([]byte(p))
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: error %v, encoding/json %v", p, err, wantErr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %+v\n want %+v", p, got, want)
		}
	}
}

func TestAppendWebhookAttemptMatchesEncodingJSON(t *testing.T) {
	next := time.Date(2026, 11, 26, 12, 5, 0, 0, time.UTC)
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := time.Date(2026, 11, 26, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	for _, a := range []WebhookAttempt{
		{},
		{MessageID: "m1", Event: "CONTACT_CREATED", TargetKind: "endpoint", TargetID: "t1", URL: "https://x/y?a=1&b=<2>", Attempt: 3,
			Outcome: "retry", StatusCode: 503, DurationMs: 12.345, Error: "bad \"gateway\"\n\u2028\xff", NextAttemptAt: &next, At: at, Replay: true},
		{MessageID: "m", Attempt: 1, Throttled: 4, Outcome: "throttled", StatusCode: 429, DurationMs: 1e-7, At: at},
		{MessageID: "m", DurationMs: 1e21, At: at},
		{MessageID: "m", DurationMs: -0.5, At: at},
		{MessageID: "m", DurationMs: 123456789.125, At: at},
		{MessageID: "m", DurationMs: math.NaN(), At: at},
		{MessageID: "m", DurationMs: math.Inf(1), At: at},
		{MessageID: "m", At: far},
		{MessageID: "m", NextAttemptAt: &far, At: at},
	} {
		want, wantErr := json.Marshal(a)
		got, err := AppendWebhookAttempt([]byte("prefix"), &a)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%+v: error %v, encoding/json %v", a, err, wantErr)
			continue
		}
		if err != nil {
			if string(got) != "prefix" {
				t.Errorf("%+v: on error got %q, want the buffer unextended", a, got)
			}
			continue
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("got  %s\nwant prefix%s", got, want)
		}
	}
}

func TestAppendWebhookDeliveryMatchesEncodingJSON(t *testing.T) {
	first := time.Date(2026, 11, 26, 12, 0, 0, 123000000, time.UTC)
	body, err := json.Marshal(map[string]any{"id": "m1", "data": map[string]any{"name": "<b>&\u2028", "n": 1.5}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []WebhookDelivery{
		{},
		{MessageID: "m1", Event: "CONTACT_CREATED", TargetKind: "endpoint", TargetID: "t1", URL: "https://x/y?a=<1>&b", Attempt: 1, FirstAt: first, Body: body},
		{MessageID: "m\"1\xff", Attempt: 4, Throttled: 2, FirstAt: first.In(time.FixedZone("y", -7200)), Body: json.RawMessage(`{}`), Replay: true},
		{MessageID: "m", FirstAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Body: body},
	} {
		want, wantErr := json.Marshal(d)
		got, err := AppendWebhookDelivery([]byte("prefix"), &d)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%+v: error %v, encoding/json %v", d, err, wantErr)
			continue
		}
		if err != nil {
			if string(got) != "prefix" {
				t.Errorf("on error got %q, want the buffer unextended", got)
			}
			continue
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("got  %s\nwant prefix%s", got, want)
		}
	}
}
