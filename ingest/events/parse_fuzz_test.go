package events

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"testing"
	"time"

	"sendstream/ingest/contacts"
	"sendstream/schemas"
)

var fuzzEventSeeds = []string{
	`{"event":"signup","email":"Ann@Example.com"}`,
	`{"event":"order.paid","contactId":" c1 ","goalType":"purchase","value":19.99,"currency":"eur","externalId":"o-1","occurredAt":"2025-01-31T12:00:00+01:00","properties":{"a":[1,{"b":null}]}}`,
	`{"event":"x","value":-5,"goalType":"other"}`,
	`{"event":"Bad Name","email":"not-an-address","value":"5","currency":"EURO","occurredAt":"yesterday","properties":[]}`,
	`{"event":"a","email":"a@exämple.com","value":1e309,"externalId":""}`,
	`{"\u0065vent":"escaped-key","event":"last-wins","properties":{}}`,
	`{"event":"a\u0000b","contactId":"\ud800","externalId":"\u00e9"}`,
	`{"event":"a","occurredAt":"0001-01-01T00:00:00Z"}`,
	` { "event" : "spaces" , "value" : 0 , "goalType" : "lead" } `,
	`{"event":"a",}`, `[]`, `null`, `{"event":"a"`, `{"event":"a"}x`, ``,
}

// FuzzParse: Parse never panics, whatever the bytes; on a valid JSON object
// it agrees with encoding/json on every member it reads (the last of
// duplicated keys wins), an accepted event keeps every documented rule, and
// parse(encode(x)) == x through the event's payload encoding and
// schemas.DecodeEventPayload.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzEventSeeds {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	name := regexp.MustCompile(`^[a-z0-9][a-z0-9._/-]{0,99}$`)
	f.Fuzz(func(t *testing.T, raw []byte, requireContact bool) {
		in, errs := Parse(raw, requireContact)
		if !json.Valid(raw) {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			if len(errs) == 0 {
				t.Fatalf("accepted a JSON value that is not an object: %q", raw)
			}
			return
		}
		for _, e := range errs {
			if e.Code == "" || (e.Msg == "" && !e.Rule) {
				t.Fatalf("error without code or message: %+v", e)
			}
		}
		if len(errs) > 0 {
			return
		}
		str := func(k string) (string, bool) {
			var s string
			if v, ok := m[k]; ok && string(v) != "null" && json.Unmarshal(v, &s) == nil {
				return s, true
			}
			return "", false
		}
		if s, _ := str("event"); s != in.Event || !name.MatchString(in.Event) {
			t.Fatalf("event %q accepted from %q", in.Event, raw)
		}
		if in.Email != "" {
			s, _ := str("email")
			if n, err := contacts.NormalizeEmail(s); err != nil || n != in.Email {
				t.Fatalf("email %q from %q (normalised %q, %v)", in.Email, s, n, err)
			}
		}
		if in.ContactID != "" && bytes.TrimSpace([]byte(in.ContactID)) == nil {
			t.Fatalf("contactId %q accepted", in.ContactID)
		}
		if s, ok := str("externalId"); ok != (in.ExternalID != "") || s != in.ExternalID {
			t.Fatalf("externalId %q accepted from %q", in.ExternalID, raw)
		}
		if in.Value != "" {
			v, err := strconv.ParseFloat(in.Value, 64)
			if err != nil || math.IsInf(v, 0) || in.GoalType == "" {
				t.Fatalf("value %q accepted (goal %q)", in.Value, in.GoalType)
			}
		}
		if in.Currency != "" && !regexp.MustCompile(`^[A-Z]{3}$`).MatchString(in.Currency) {
			t.Fatalf("currency %q accepted", in.Currency)
		}
		if !in.OccurredAt.IsZero() && (in.OccurredAt.Unix() < 1 || in.OccurredAt.Unix() > maxDateTime || in.OccurredAt.Location() != time.UTC) {
			t.Fatalf("occurredAt %v accepted", in.OccurredAt)
		}
		if in.Properties != nil && (in.Properties[0] != '{' || !json.Valid(in.Properties)) {
			t.Fatalf("properties %q accepted", in.Properties)
		}
		if requireContact && in.Email == "" && in.ContactID == "" {
			t.Fatalf("accepted without a contact: %q", raw)
		}
		// parse(encode(x)) == x: the payload the event is published with
		// decodes to the same fields.
		at := time.Unix(1700000000, 0).UTC()
		if !in.OccurredAt.IsZero() {
			at = in.OccurredAt
		}
		enc := appendPayload(nil, payload{in: &in, contactID: in.ContactID, occurredAt: at, receivedAt: at, source: "api"})
		p, err := schemas.DecodeEventPayload(enc)
		if err != nil {
			t.Fatalf("payload %s does not decode: %v", enc, err)
		}
		if p.Event != in.Event || p.Email != in.Email || p.ContactID != in.ContactID || p.GoalType != in.GoalType ||
			p.Value != in.Value || p.Currency != in.Currency || p.ExternalID != in.ExternalID || !p.OccurredAt.Equal(at) {
			t.Fatalf("payload round trip: %+v from %+v", p, in)
		}
		if in.Properties != nil {
			var a, b any
			if json.Unmarshal(p.Properties, &a) != nil || json.Unmarshal(in.Properties, &b) != nil {
				t.Fatalf("properties %s do not survive the payload", p.Properties)
			}
		}
	})
}

// FuzzEachMember: the scanner finds the same members as encoding/json in
// every valid JSON object (keys decoded, the last duplicate winning), and
// the same elements in every valid array; it never panics on other bytes.
func FuzzEachMember(f *testing.F) {
	for _, s := range fuzzEventSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`[1, "a", {"b":[]}, null , true]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := map[string]string{}
		badKey := false
		err := eachMember(raw, func(k, v []byte) {
			key, ok := decodeString(append(append([]byte{'"'}, k...), '"'))
			badKey = badKey || !ok
			got[key] = string(v)
		})
		var els []string
		aerr := eachElement(raw, func(i int, v []byte) {
			if i != len(els) {
				t.Fatalf("element %d out of order", i)
			}
			els = append(els, string(v))
		})
		if !json.Valid(raw) {
			return // the scanner trusts checked JSON: only no panic here
		}
		if badKey {
			t.Fatalf("a key of valid %q does not decode", raw)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil && m != nil {
			if err != nil || len(got) != len(m) {
				t.Fatalf("members of %q: %v %v, encoding/json %v", raw, got, err, m)
			}
			for k, v := range m {
				if got[k] != string(v) {
					t.Fatalf("member %q of %q: %q, encoding/json %q", k, raw, got[k], v)
				}
			}
		} else if err == nil {
			t.Fatalf("members found in %q, which is not an object", raw)
		}
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) == nil && a != nil {
			if aerr != nil || len(els) != len(a) {
				t.Fatalf("elements of %q: %v %v, encoding/json %v", raw, els, aerr, a)
			}
			for i := range a {
				if els[i] != string(a[i]) {
					t.Fatalf("element %d of %q: %q, encoding/json %q", i, raw, els[i], a[i])
				}
			}
		}
	})
}
