package events

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"sendstream/schemas"
)

func TestParseAccepts(t *testing.T) {
	in, errs := Parse([]byte(`{"event":"order.completed/v2-x_y","email":"  Ann@Example.COM ","goalType":"purchase",
		"value":19.99,"currency":"eur","externalId":"o-1","occurredAt":"2025-03-01T10:00:00+02:00",
		"properties":{"a":[1,{"b":"}"}]},"unknown":true}`), true)
	if len(errs) > 0 {
		t.Fatalf("errors: %+v", errs)
	}
	want := Input{
		Event: "order.completed/v2-x_y", Email: "ann@example.com", GoalType: "purchase", Value: "19.99",
		Currency: "EUR", ExternalID: "o-1", OccurredAt: time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC),
		Properties: []byte(`{"a":[1,{"b":"}"}]}`),
	}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("got %+v\nwant %+v", in, want)
	}
}

func TestParseRules(t *testing.T) {
	long := strings.Repeat("a", 101)
	cases := []struct {
		name, body string
		public     bool
		fields     []string
		code       string
	}{
		{"missing event", `{"email":"a@b.co"}`, false, []string{"event"}, CodeInvalid},
		{"empty event", `{"event":"","email":"a@b.co"}`, false, []string{"event"}, CodeInvalid},
		{"uppercase", `{"event":"Signup","email":"a@b.co"}`, false, []string{"event"}, CodeInvalid},
		{"starts with dot", `{"event":".x","email":"a@b.co"}`, false, []string{"event"}, CodeInvalid},
		{"space", `{"event":"a b","email":"a@b.co"}`, false, []string{"event"}, CodeInvalid},
		{"101 chars", `{"event":"` + long + `","email":"a@b.co"}`, false, []string{"event"}, CodeInvalid},
		{"event number", `{"event":5,"email":"a@b.co"}`, false, []string{"event"}, CodeInvalid},
		{"no contact", `{"event":"x"}`, false, []string{"email", "contactId"}, CodeContactRequired},
		{"bad email", `{"event":"x","email":"nope"}`, false, []string{"email"}, CodeInvalid},
		{"email number", `{"event":"x","email":1}`, false, []string{"email"}, CodeInvalid},
		{"empty contactId", `{"event":"x","contactId":""}`, false, []string{"contactId"}, CodeInvalid},
		{"goal enum", `{"event":"x","email":"a@b.co","goalType":"sale"}`, false, []string{"goalType"}, CodeInvalid},
		{"purchase no value", `{"event":"x","email":"a@b.co","goalType":"purchase"}`, false, []string{"value"}, CodeValueRequired},
		{"subscription no value", `{"event":"x","email":"a@b.co","goalType":"subscription"}`, false, []string{"value"}, CodeValueRequired},
		{"value no goal", `{"event":"x","email":"a@b.co","value":3}`, false, []string{"value"}, CodeValueNeedsGoal},
		{"value string", `{"event":"x","email":"a@b.co","goalType":"lead","value":"3"}`, false, []string{"value"}, CodeInvalid},
		{"value beyond float64", `{"event":"x","email":"a@b.co","goalType":"lead","value":1e309}`, false, []string{"value"}, CodeInvalid},
		{"value below -float64", `{"event":"x","email":"a@b.co","goalType":"lead","value":-1e309}`, false, []string{"value"}, CodeInvalid},
		{"value 1e13 ok (no invented bound)", `{"event":"x","email":"a@b.co","goalType":"lead","value":1e13}`, false, nil, ""},
		{"value 1e300 ok", `{"event":"x","email":"a@b.co","goalType":"purchase","value":-1e300}`, false, nil, ""},
		{"long externalId ok", `{"event":"x","email":"a@b.co","externalId":"` + strings.Repeat("é", 1000) + `"}`, false, nil, ""},
		{"long contactId ok", `{"event":"x","contactId":"` + strings.Repeat("c", 1000) + `"}`, false, nil, ""},
		{"currency 2", `{"event":"x","email":"a@b.co","currency":"EU"}`, false, []string{"currency"}, CodeInvalid},
		{"currency unknown", `{"event":"x","email":"a@b.co","currency":"ABC"}`, false, []string{"currency"}, CodeInvalid},
		{"occurredAt date", `{"event":"x","email":"a@b.co","occurredAt":"2025-03-01"}`, false, []string{"occurredAt"}, CodeInvalid},
		{"occurredAt no zone", `{"event":"x","email":"a@b.co","occurredAt":"2025-03-01T10:00:00"}`, false, []string{"occurredAt"}, CodeInvalid},
		{"occurredAt garbage", `{"event":"x","email":"a@b.co","occurredAt":"yesterday"}`, false, []string{"occurredAt"}, CodeInvalid},
		{"occurredAt number", `{"event":"x","email":"a@b.co","occurredAt":1700000000}`, false, []string{"occurredAt"}, CodeInvalid},
		{"occurredAt 1969", `{"event":"x","email":"a@b.co","occurredAt":"1969-12-31T00:00:00Z"}`, false, []string{"occurredAt"}, CodeInvalid},
		{"properties array", `{"event":"x","email":"a@b.co","properties":[1]}`, false, []string{"properties"}, CodeInvalid},
		{"properties string", `{"event":"x","email":"a@b.co","properties":"{}"}`, false, []string{"properties"}, CodeInvalid},
		{"externalId number", `{"event":"x","email":"a@b.co","externalId":7}`, false, []string{"externalId"}, CodeInvalid},
		{"several", `{"event":"X","email":"a@b.co","value":"1","currency":"zz"}`, false, []string{"event", "value", "currency"}, CodeInvalid},
		{"public anonymous ok", `{"event":"x"}`, true, nil, ""},
		{"public goal rule", `{"event":"x","goalType":"purchase"}`, true, []string{"value"}, CodeValueRequired},
		{"not an object", `[1]`, false, nil, CodeInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := Parse([]byte(c.body), !c.public)
			if c.code == "" {
				if len(errs) > 0 {
					t.Fatalf("unexpected errors %+v", errs)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatal("accepted")
			}
			if got := fieldsOf("", errs); !reflect.DeepEqual(got, c.fields) && !(len(got) == 0 && c.fields == nil) {
				t.Fatalf("fields %v, want %v", got, c.fields)
			}
			if got := errorCode(errs); got != c.code {
				t.Fatalf("code %q, want %q", got, c.code)
			}
		})
	}
}

func TestOriginAllowed(t *testing.T) {
	doms := []string{"shop.com", "example.org"}
	cases := map[string]bool{
		"":                         true,
		"https://shop.com":         true,
		"https://www.shop.com":     true,
		"http://a.b.shop.com:8080": true,
		"https://evilshop.com":     false,
		"https://shop.com.evil.io": false,
		"https://example.org":      true,
		"null":                     false,
		"https://other.net":        false,
	}
	for origin, want := range cases {
		if got := OriginAllowed(origin, doms); got != want {
			t.Errorf("OriginAllowed(%q) = %v, want %v", origin, got, want)
		}
	}
	if !OriginAllowed("https://anything.net", nil) {
		t.Error("a token without domains must allow every origin")
	}
}

func TestPayloadEncoding(t *testing.T) {
	in := Input{
		Event: "a.b", Email: "x@y.co", GoalType: "purchase", Value: "-1.5e2", Currency: "USD",
		ExternalID: "ext \"<&>\u2028\x01 é", Properties: []byte("{ \"k\" : [ 1 , \"a b\\\" c\" ] }"),
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	b := appendPayload(nil, payload{in: &in, contactID: "c1", occurredAt: at, receivedAt: at.Add(time.Second), source: "api"})
	var got schemas.EventPayload
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, got.Properties); err != nil {
		t.Fatal(err)
	}
	got.Properties = compact.Bytes()
	want := schemas.EventPayload{
		Event: "a.b", ContactID: "c1", Email: "x@y.co", GoalType: "purchase", Value: "-1.5e2", Currency: "USD",
		ExternalID: in.ExternalID, OccurredAt: at, ReceivedAt: at.Add(time.Second),
		Properties: json.RawMessage(`{"k":[1,"a b\" c"]}`), Source: "api",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	var invalidUTF8 string
	if err := json.Unmarshal(schemas.AppendJSONString(nil, "a\xffb"), &invalidUTF8); err != nil || invalidUTF8 != "a\ufffdb" {
		t.Fatalf("invalid UTF-8: %q %v", invalidUTF8, err)
	}
}

func TestScannerRejectsMalformed(t *testing.T) {
	for _, b := range []string{`{"a":1`, `{"a" 1}`, `{a:1}`, `{"a":1,}x`, `{"a":"x}`} {
		if err := eachMember([]byte(b), func(_, _ []byte) {}); err == nil {
			t.Errorf("eachMember(%s) accepted", b)
		}
	}
	var n int
	if err := eachElement([]byte(` [ {"a":[1,2]} , "x]" , 3 ] `), func(int, []byte) { n++ }); err != nil || n != 3 {
		t.Fatalf("eachElement: n=%d err=%v", n, err)
	}
}

func TestValueText(t *testing.T) {
	long := "1." + strings.Repeat("5", 20000) // more digits than Postgres numeric keeps after the point
	cases := []struct{ in, want string }{
		{"49.5", "49.5"},
		{"-10", "-10"},
		{"1e13", "1e13"},
		{"1e-20000", "0"},            // underflows: stored as 0
		{"-0.0", "0"},                // zero in any spelling
		{long, "1.5555555555555556"}, // kept as its float64 value
	}
	for _, c := range cases {
		got, ok := valueText([]byte(c.in))
		if !ok || got != c.want {
			t.Errorf("valueText(%.20s…) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	for _, bad := range []string{"1e309", "-1e309", "1e99999"} {
		if got, ok := valueText([]byte(bad)); ok {
			t.Errorf("valueText(%s) = %q, accepted", bad, got)
		}
	}
}
