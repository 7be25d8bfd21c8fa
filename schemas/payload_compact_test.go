package schemas

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestDecodeEnvelopeNotesCompactPayload: DecodeEnvelope promises a compact
// payload only when it checked it and json.Marshal would write it as is,
// so republishing the envelope gives json.Marshal's bytes either way.
func TestDecodeEnvelopeNotesCompactPayload(t *testing.T) {
	head := `{"id":"e1","workspace":"w","type":"t.v1","key":"k","occurredAt":"2026-01-02T03:04:05Z","attempt":0,"payload":`
	cases := []struct {
		payload string
		compact bool
	}{
		{`{"a":1,"b":["x",true,null]}`, true},
		{`{"a": 1}`, false},             // whitespace outside strings
		{`{"a":"<b>"}`, false},          // json.Marshal escapes < and >
		{`{"a":"x&y"}`, false},          // and &
		{`{"a":"sp ace \u00e9"}`, true}, // space inside a string is content
	}
	for _, c := range cases {
		data := []byte(head + c.payload + `}`)
		env := Envelope{PayloadCompact: true} // a stale promise must not survive
		if err := DecodeEnvelope(data, &env); err != nil {
			t.Fatalf("%s: %v", c.payload, err)
		}
		if env.PayloadCompact != c.compact {
			t.Errorf("%s: PayloadCompact %v, want %v", c.payload, env.PayloadCompact, c.compact)
		}
		got, err := AppendEnvelope(nil, &env)
		if err != nil {
			t.Fatalf("%s: append: %v", c.payload, err)
		}
		env.PayloadCompact = false
		want, err := json.Marshal(&env)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: republished\n%s\nwant\n%s", c.payload, got, want)
		}
	}

	// The unchecked decode never promises anything.
	env := Envelope{PayloadCompact: true}
	if err := DecodeEnvelopeUnchecked([]byte(head+`{"a":1}}`), &env); err != nil {
		t.Fatal(err)
	}
	if env.PayloadCompact {
		t.Error("DecodeEnvelopeUnchecked set PayloadCompact")
	}
	// Nor does the encoding/json path (here: an escaped key).
	env = Envelope{PayloadCompact: true}
	if err := DecodeEnvelope([]byte(`{"i\u0064":"e2","payload":{"a":1},"occurredAt":"`+time.Unix(0, 0).UTC().Format(time.RFC3339)+`"}`), &env); err != nil {
		t.Fatal(err)
	}
	if env.ID != "e2" || env.PayloadCompact {
		t.Errorf("slow path: id %q, PayloadCompact %v", env.ID, env.PayloadCompact)
	}
}
