package contacts

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNormalizeEmail(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"ann@example.com", "ann@example.com", true},
		{"  Ann.Lee+tag@Example.CO.UK \n", "ann.lee+tag@example.co.uk", true},
		{"o'hara@sub.example.org", "o'hara@sub.example.org", true},
		{"user@xn--bcher-kva.example", "user@xn--bcher-kva.example", true},
		{"", "", false},
		{"   ", "", false},
		{"plain", "", false},
		{"a@localhost", "", false},
		{"@example.com", "", false},
		{"a@", "", false},
		{"a@@example.com", "", false},
		{"a@b@example.com", "", false},
		{"Ann <ann@example.com>", "", false},
		{"<ann@example.com>", "", false},
		{"a b@example.com", "", false},
		{`"a b"@example.com`, "", false},
		{"a@-example.com", "", false},
		{"a@example-.com", "", false},
		{"a@exa_mple.com", "", false},
		{"a@example..com", "", false},
		{strings.Repeat("a", 65) + "@example.com", "", false},
		{"a@" + strings.Repeat("b", 250) + ".com", "", false},
	} {
		got, err := NormalizeEmail(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestCheckFieldValue(t *testing.T) {
	for _, tc := range []struct {
		typ, raw string
		want     any
		ok       bool
	}{
		{FieldString, `"pro"`, "pro", true},
		{FieldString, `""`, "", true},
		{FieldString, `5`, nil, false},
		{FieldString, `"` + strings.Repeat("é", 100_000) + `"`, strings.Repeat("é", 100_000), true}, // no length rule (the spec has none)
		{FieldNumber, `42`, json.Number("42"), true},
		{FieldNumber, `-1.5e3`, json.Number("-1.5e3"), true},
		{FieldNumber, `"42"`, nil, false},
		{FieldNumber, `true`, nil, false},
		{FieldBoolean, `false`, false, true},
		{FieldBoolean, `"true"`, nil, false},
		{FieldBoolean, `1`, nil, false},
		{FieldDate, `"2024-02-29"`, "2024-02-29", true},
		{FieldDate, `"2023-02-29"`, nil, false},
		{FieldDate, `"2024-01-02T03:04:05+01:00"`, "2024-01-02T02:04:05Z", true},
		{FieldDate, `"02/01/2024"`, nil, false},
		{FieldDate, `20240101`, nil, false},
		{FieldString, `null`, nil, true},
		{FieldNumber, ` null `, nil, true},
		{"unknown", `"x"`, nil, false},
	} {
		got, ok := checkFieldValue(tc.typ, json.RawMessage(tc.raw))
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("checkFieldValue(%s, %.30s) = %v, %v; want %v, %v", tc.typ, tc.raw, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSignerRoundTripTamperAndExpiry(t *testing.T) {
	s, err := NewSigner("secret-one-0123456789", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	s.now = func() time.Time { return now }
	tok, exp := s.Sign("ws1", "contact1")
	if !exp.Equal(now.Add(time.Hour)) {
		t.Fatalf("expiry %v", exp)
	}
	ws, id, err := s.Verify(tok)
	if err != nil || ws != "ws1" || id != "contact1" {
		t.Fatalf("verify: %q %q %v", ws, id, err)
	}
	for i := range tok {
		b := []byte(tok)
		b[i] ^= 0x01
		if _, _, err := s.Verify(string(b)); err == nil {
			t.Fatalf("tampered byte %d accepted", i)
		}
	}
	other, _ := NewSigner("secret-two-0123456789", time.Hour)
	other.now = s.now
	if _, _, err := other.Verify(tok); err != ErrTokenInvalid {
		t.Fatalf("other secret: %v", err)
	}
	now = now.Add(time.Hour + time.Second)
	if _, _, err := s.Verify(tok); err != ErrTokenExpired {
		t.Fatalf("expired: %v", err)
	}
	if _, err := NewSigner("", 0); err == nil {
		t.Fatal("empty secret accepted")
	}
}

func TestTakeBatchKeepsEmailsUniqueAndOrder(t *testing.T) {
	mk := func(email string) *pending { return &pending{in: UpsertInput{Email: email}} }
	a1, b1, a2, c1, a3 := mk("a"), mk("b"), mk("a"), mk("c"), mk("a")
	gone := mk("d")
	gone.abandoned.Store(true)
	batch, rest := takeBatch([]*pending{a1, b1, a2, gone, c1, a3}, nil)
	if !reflect.DeepEqual(batch, []*pending{a1, b1, c1}) || !reflect.DeepEqual(rest, []*pending{a2, a3}) {
		t.Fatalf("batch %v rest %v", batch, rest)
	}
	// An email held by a running statement waits.
	batch, rest = takeBatch([]*pending{a1, b1}, map[string]struct{}{"a": {}})
	if !reflect.DeepEqual(batch, []*pending{b1}) || !reflect.DeepEqual(rest, []*pending{a1}) {
		t.Fatalf("busy: batch %v rest %v", batch, rest)
	}
	var many []*pending
	for i := 0; i < maxBatch+5; i++ {
		many = append(many, mk(strings.Repeat("x", i+1)))
	}
	batch, rest = takeBatch(many, nil)
	if len(batch) != maxBatch || len(rest) != 5 || rest[0] != many[maxBatch] {
		t.Fatalf("cap: %d in batch, %d left", len(batch), len(rest))
	}
}

func TestChangedFields(t *testing.T) {
	r := upsertRow{outcome: "updated"}
	r.c.FirstName, r.old.firstName = ptr("B"), ptr("A")
	r.c.Country, r.old.country = ptr("DE"), ptr("DE")
	r.c.CustomFields = json.RawMessage(`{"a": 1, "b": "x", "d": true}`)
	r.old.custom = []byte(`{"a": 1, "b": "y", "c": 2}`)
	got := changedFields(r)
	want := []string{"firstName", "customFields.b", "customFields.c", "customFields.d"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if changedFields(upsertRow{outcome: "created"}) != nil {
		t.Fatal("created has changes")
	}
}

func TestAppendContactMatchesEncodingJSON(t *testing.T) {
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	for _, c := range []Contact{
		{ID: "a", Email: "a@example.com", Status: StatusActive, CustomFields: json.RawMessage(`{}`), CreatedAt: ts, UpdatedAt: ts},
		{ID: "b", Email: "b@example.com", FirstName: ptr("Zoë \"Z\" \\ \n\t\x01 \u2028 end"), Country: ptr(""),
			Language: ptr("de"), Status: StatusPending, Source: ptr("api"),
			CustomFields: json.RawMessage(`{"plan":"pro","n":1.5}`), Metadata: json.RawMessage(`{"a":[1,2]}`),
			CreatedAt: ts, UpdatedAt: ts.Add(time.Second)},
		{ID: "c", Email: "c@example.com", FirstName: ptr("bad \xff utf8"), Status: StatusBounced,
			CustomFields: json.RawMessage(`{}`), Metadata: json.RawMessage(`null`), CreatedAt: ts, UpdatedAt: ts},
	} {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		got := appendContact(nil, &c)
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("invalid JSON %s: %v", got, err)
		}
		_ = json.Unmarshal(want, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	}
	p := encodePage(Page{Contacts: []Contact{{ID: "x", Email: "x@example.com", Status: "ACTIVE", CreatedAt: ts, UpdatedAt: ts}}, Total: 7},
		pagination{Page: 2, Limit: 1, Total: 7, TotalPages: 7})
	want, _ := json.Marshal(pageResponse{Contacts: []Contact{{ID: "x", Email: "x@example.com", Status: "ACTIVE", CreatedAt: ts, UpdatedAt: ts,
		CustomFields: json.RawMessage(`{}`), Metadata: json.RawMessage(`null`)}}, Pagination: pagination{Page: 2, Limit: 1, Total: 7, TotalPages: 7}})
	if string(p) != string(want) {
		t.Fatalf("page\n got  %s\n want %s", p, want)
	}
}
