package schemas

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func checkContactPayload(t *testing.T, p ContactPayload) {
	t.Helper()
	want, werr := json.Marshal(p)
	got, gerr := AppendContactPayload([]byte("prefix"), &p)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("json.Marshal error %v, AppendContactPayload error %v (payload %+v)", werr, gerr, p)
	}
	if werr == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendContactPayload:\n got %s\nwant prefix%s", got, want)
	}
}

// TestAppendContactPayloadMatchesJSONMarshal compares the hand encoder
// with json.Marshal: nulls, Postgres-style jsonb text (spaces, HTML
// characters), update lists, zones and refused years.
func TestAppendContactPayloadMatchesJSONMarshal(t *testing.T) {
	at := time.Date(2026, 11, 22, 9, 1, 2, 345678900, time.UTC)
	s := func(v string) *string { return &v }
	for _, p := range []ContactPayload{
		{},
		{ContactID: "c1", Email: "a@x.test", Status: "ACTIVE", CustomFields: json.RawMessage(`{}`), Metadata: json.RawMessage(`null`),
			CreatedAt: at, UpdatedAt: at},
		{ContactID: "c2", Email: "Zoë <z@x.test>", FirstName: s("Ada \"Q\" & co"), Country: s(""), Language: s("de\u2028"),
			Status: "PENDING", Source: s("form"), CustomFields: json.RawMessage(`{"plan": "<pro>", "n": [1, 2.5, null]}`),
			Metadata: json.RawMessage(`{"utm": {"a": "b&c"}}`), CreatedAt: at.In(time.FixedZone("x", 3600)), UpdatedAt: at,
			UpdatedFields: []string{"firstName", "customFields.plan"}},
		{ContactID: "c3", UpdatedFields: []string{}, CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{ContactID: "c4", CustomFields: json.RawMessage(`{"a":`), CreatedAt: at, UpdatedAt: at},
	} {
		checkContactPayload(t, p)
	}
}

// FuzzAppendContactPayload varies the strings and the raw fields.
func FuzzAppendContactPayload(f *testing.F) {
	f.Add("a@x.test", "Ada", []byte(`{"a": 1}`), []byte(`null`))
	f.Add("\xff\u2028<", "a\"b\\c", []byte(` [ 1 , "&" ] `), []byte(`{`))
	f.Fuzz(func(t *testing.T, email, name string, custom, meta []byte) {
		checkContactPayload(t, ContactPayload{ContactID: name, Email: email, FirstName: &name, Status: email,
			CustomFields: custom, Metadata: meta, CreatedAt: time.Unix(1e9, 5).UTC(), UpdatedAt: time.Unix(2e9, 0).UTC(),
			UpdatedFields: []string{email, name}})
	})
}

func BenchmarkAppendContactPayload(b *testing.B) {
	name := "Ada"
	p := ContactPayload{ContactID: "01a202c4a2543f6d80840a1474015568", Email: "ada@example.com", FirstName: &name, Status: "ACTIVE",
		CustomFields: json.RawMessage(`{"plan": "pro", "seats": 3}`), Metadata: json.RawMessage(`null`),
		CreatedAt: time.Unix(1e9, 5).UTC(), UpdatedAt: time.Unix(1e9, 5).UTC()}
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf, _ = AppendContactPayload(buf[:0], &p)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(p)
		}
	})
}
