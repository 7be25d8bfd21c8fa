package requestlog

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"sendstream/pipeline"
	"sendstream/schemas"
)

func envelope(t *testing.T, id string, p schemas.RequestLog) schemas.Envelope {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return schemas.Envelope{
		ID: id, Workspace: "ws_1", Type: schemas.TypeRequestLogged, Key: "ws_1",
		OccurredAt: p.At, Payload: raw,
	}
}

func sample(at time.Time) schemas.RequestLog {
	return schemas.RequestLog{
		At: at, Method: "POST", Path: "/v1/events", Status: 202, DurationUS: 1500,
		KeyID: "key_1", KeyKind: "api_key",
	}
}

func TestDecodeRejectsMalformedEnvelopes(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	good := envelope(t, "id1", sample(at))
	cases := []struct {
		name string
		edit func(e *schemas.Envelope)
	}{
		{"wrong type", func(e *schemas.Envelope) { e.Type = "event.recorded.v1" }},
		{"no id", func(e *schemas.Envelope) { e.ID = "" }},
		{"no workspace", func(e *schemas.Envelope) { e.Workspace = "" }},
		{"not json", func(e *schemas.Envelope) { e.Payload = json.RawMessage(`{"at":`) }},
		{"payload is an array", func(e *schemas.Envelope) { e.Payload = json.RawMessage(`[]`) }},
		{"status is a string", func(e *schemas.Envelope) {
			e.Payload = json.RawMessage(`{"at":"2026-01-02T03:04:05Z","method":"GET","path":"/v1/x","status":"200"}`)
		}},
		{"missing time", func(e *schemas.Envelope) {
			p := sample(time.Time{})
			*e = envelope(t, "id1", p)
		}},
		{"time beyond DateTime", func(e *schemas.Envelope) {
			*e = envelope(t, "id1", sample(time.Date(2107, 1, 1, 0, 0, 0, 0, time.UTC)))
		}},
		{"status out of range", func(e *schemas.Envelope) {
			p := sample(at)
			p.Status = 70000
			*e = envelope(t, "id1", p)
		}},
		{"negative duration", func(e *schemas.Envelope) {
			p := sample(at)
			p.DurationUS = -1
			*e = envelope(t, "id1", p)
		}},
		{"missing path", func(e *schemas.Envelope) {
			p := sample(at)
			p.Path = ""
			*e = envelope(t, "id1", p)
		}},
	}
	s := &Stage{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := good
			c.edit(&env)
			out, err := s.Handle(context.Background(), env)
			if err == nil || !pipeline.IsPermanent(err) {
				t.Fatalf("Handle = %v, want a permanent error", err)
			}
			if len(out) != 0 || s.buf.Len() != 0 {
				t.Fatalf("malformed envelope produced output %v or a buffered row", out)
			}
		})
	}
}

func TestDecodeMapsEveryField(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	p := schemas.RequestLog{
		At: at, Method: "POST", Path: "/v1/transactional", Status: 200, DurationUS: 4321,
		KeyID: "key_9", KeyKind: "api_key", RequestBody: `{"to":"a@b.c"}`, ResponseBody: `{"ok":true}`,
		Truncated: true,
		Produced: schemas.Produced{
			MessageIDs: []string{"m1", "m2"}, EventIDs: []string{"e1"}, JourneyRunIDs: []string{"j1"},
			ContactIDs: []string{"c1"}, Recipient: "a@b.c", ExternalID: "x-1",
		},
		IP: "127.0.0.1", UserAgent: "curl/8",
	}
	now := time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)
	r, err := decode(envelope(t, "id7", p), now)
	if err != nil {
		t.Fatal(err)
	}
	want := row{
		id: "id7", workspace: "ws_1", at: at.UTC(), method: "POST", path: "/v1/transactional",
		status: 200, durationUS: 4321, keyID: "key_9", keyKind: "api_key",
		requestBody: `{"to":"a@b.c"}`, responseBody: `{"ok":true}`, truncated: 1,
		messageIDs: []string{"m1", "m2"}, eventIDs: []string{"e1"}, journeyRunIDs: []string{"j1"},
		contactIDs: []string{"c1"}, recipient: "a@b.c", externalID: "x-1", ip: "127.0.0.1",
		userAgent: "curl/8", received: now,
	}
	if got, w := dump(r), dump(want); got != w {
		t.Fatalf("decode:\n got %s\nwant %s", got, w)
	}
}

func TestHandleBuffersARedeliveryOnce(t *testing.T) {
	s := &Stage{}
	at := time.Now().UTC()
	for _, id := range []string{"a", "b", "a"} {
		if _, err := s.Handle(context.Background(), envelope(t, id, sample(at))); err != nil {
			t.Fatal(err)
		}
	}
	if rows := s.buf.Rows(); len(rows) != 2 || rows[0].id != "a" || rows[1].id != "b" {
		t.Fatalf("buffer = %v, want rows a and b once each", rows)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if DefaultConfig().RetentionDays != 90 {
		t.Fatalf("default retention = %d days, spec 8.3 says 90", DefaultConfig().RetentionDays)
	}
	for _, c := range []Config{
		{RetentionDays: 0, RetentionEvery: time.Hour, RetentionTimeout: time.Minute},
		{RetentionDays: 90, RetentionEvery: 0, RetentionTimeout: time.Minute},
		{RetentionDays: 90, RetentionEvery: time.Hour},
	} {
		if c.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want an error", c)
		}
	}
}

func TestIsDay(t *testing.T) {
	for id, want := range map[string]bool{"20260102": true, "2026010": false, "202601021": false, "2026-1-2": false, "'; DROP": false} {
		if isDay(id) != want {
			t.Errorf("isDay(%q) = %v", id, !want)
		}
	}
}

func dump(r row) string {
	b, _ := json.Marshal([]any{r.id, r.workspace, r.at, r.method, r.path, r.status, r.durationUS,
		r.keyID, r.keyKind, r.requestBody, r.responseBody, r.truncated, r.messageIDs, r.eventIDs,
		r.journeyRunIDs, r.contactIDs, r.recipient, r.externalID, r.ip, r.userAgent, r.received})
	return string(b)
}

// TestDecodeUncheckedEnvelopes: the stage reads envelopes without the
// payload check (Spec.UncheckedPayload), so decode must refuse a payload
// that is not exactly one JSON value, and take the usual shape as the
// checked decode does.
func TestDecodeUncheckedEnvelopes(t *testing.T) {
	now := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	env := envelope(t, "e1", sample(now))
	b, err := schemas.AppendEnvelope(nil, &env)
	if err != nil {
		t.Fatal(err)
	}
	var checked, unchecked schemas.Envelope
	if err := schemas.DecodeEnvelope(b, &checked); err != nil {
		t.Fatal(err)
	}
	if err := schemas.DecodeEnvelopeUnchecked(b, &unchecked); err != nil {
		t.Fatal(err)
	}
	want, err := decode(checked, now)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decode(unchecked, now)
	if err != nil {
		t.Fatal(err)
	}
	if dump(got) != dump(want) {
		t.Fatalf("unchecked decode:\n got %s\nwant %s", dump(got), dump(want))
	}

	// Members after the payload (not how Go writes an envelope) reach
	// decode as trailing bytes: refused, never half read.
	for _, tail := range []string{`,"traceparent":"t"}`, `,"id":"e2"}`, `x}`} {
		bad := append(append([]byte(nil), b[:len(b)-1]...), tail...)
		var e schemas.Envelope
		if err := schemas.DecodeEnvelopeUnchecked(bad, &e); err != nil {
			continue // refused by the envelope decode itself
		}
		if _, err := decode(e, now); err == nil {
			t.Fatalf("decode took a payload with %q after it: %q", tail, e.Payload)
		}
	}
}
