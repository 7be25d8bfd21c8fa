package goals

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"sendstream/schemas"
)

// TestOutputsCompactOnlyWhenMarshalAgrees: the outputs carry the promise of
// a compact payload (so the producer copies them unchecked) only when
// json.Marshal would write them byte for byte as they are; a value with
// whitespace or a payload that was not checked gets no promise.
func TestOutputsCompactOnlyWhenMarshalAgrees(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	for _, c := range []struct {
		value   string
		compact bool
	}{{"49.95", true}, {"", true}, {"-1e3", true}, {" 1", false}} {
		p, err := json.Marshal(schemas.EventPayload{Event: "order <paid>", ContactID: "c1", Email: "a&b@example.com", GoalType: "purchase",
			Value: c.value, Currency: "EUR", OccurredAt: at, ReceivedAt: at, Properties: json.RawMessage(`{"a":[1,"x y"],"b":{"c":null}}`)})
		if err != nil {
			t.Fatal(err)
		}
		in := schemas.Envelope{ID: "e1", Workspace: "w", Type: schemas.TypeEventRecorded, Key: "w:c1", OccurredAt: at, Payload: p}
		data, err := schemas.AppendEnvelope(nil, &in)
		if err != nil {
			t.Fatal(err)
		}
		var env schemas.Envelope
		if err := schemas.DecodeEnvelope(data, &env); err != nil {
			t.Fatal(err)
		}
		dp, err := schemas.DecodeEventPayload(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		outs := outputs(env, &dp, wants{eventRecorded: true, goalRecorded: true, journeys: true})
		if len(outs) != 3 {
			t.Fatalf("%d outputs, want 3", len(outs))
		}
		for _, o := range outs {
			if o.Payload == nil {
				t.Fatal("no payload")
			}
			want := o.PayloadCompact
			if o.Type != schemas.TypeEventMatched && want != c.compact {
				t.Errorf("value %q: %s PayloadCompact %v, want %v", c.value, o.Type, want, c.compact)
			}
			got, err := schemas.AppendEnvelope(nil, &o)
			if err != nil {
				t.Fatal(err)
			}
			o.PayloadCompact = false
			ref, err := json.Marshal(&o)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, ref) {
				t.Errorf("value %q: %s published as\n%s\nwant\n%s", c.value, o.Type, got, ref)
			}
		}
	}
}
