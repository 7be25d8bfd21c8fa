package contacts

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzCheckFieldValue: a custom field value is never accepted for the
// wrong type, an accepted value is what its type says (a string of at most
// 10,000 characters, a finite JSON number, a boolean, a date in one of the
// two stored forms), and checking the stored value again gives it back
// unchanged (the normalisation is idempotent, so a read-modify-write keeps
// values).
func FuzzCheckFieldValue(f *testing.F) {
	for _, s := range []string{`"pro"`, `42`, `-0.5e3`, `true`, `null`, `"2024-01-02"`, `"2024-01-02T10:00:00+02:00"`,
		`"2024-02-30"`, `1e309`, `1e-20000`, `"a\u0000b"`, `"\ud800"`, `[1]`, `{}`, `"` + strings.Repeat("é", 10001) + `"`,
		` 7 `, `"0001-01-01T00:00:00Z"`, `"2024-01-02T10:00:00.123456789Z"`} {
		for _, typ := range []string{FieldString, FieldNumber, FieldBoolean, FieldDate, "money"} {
			f.Add(typ, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, typ string, raw []byte) {
		v, ok := checkFieldValue(typ, raw)
		if !ok || v == nil || !json.Valid(raw) {
			return
		}
		switch x := v.(type) {
		case string:
			if typ == FieldDate {
				if _, err := time.Parse("2006-01-02", x); err != nil {
					if p, err := time.Parse(time.RFC3339Nano, x); err != nil || p.Location() != time.UTC {
						t.Fatalf("date %q stored from %q", x, raw)
					}
				}
			}
			if typ != FieldString && typ != FieldDate {
				t.Fatalf("a string for a %s field: %q", typ, raw)
			}
		case json.Number:
			if typ != FieldNumber {
				t.Fatalf("a number for a %s field: %q", typ, raw)
			}
			if _, err := x.Float64(); err != nil {
				t.Fatalf("number %q accepted: %v", x, err)
			}
		case bool:
			if typ != FieldBoolean {
				t.Fatalf("a boolean for a %s field: %q", typ, raw)
			}
		default:
			t.Fatalf("%T accepted for %s", v, typ)
		}
		enc, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("stored value %#v does not encode: %v", v, err)
		}
		again, ok := checkFieldValue(typ, enc)
		if !ok || again != v {
			t.Fatalf("%s value %q stored as %s, which checks as %#v %v", typ, raw, enc, again, ok)
		}
	})
}

// FuzzSignerVerify: a confirmation token signs exactly its workspace and
// contact: Sign then Verify gives them back whenever both are non-empty
// and free of NUL (the separator), and otherwise the token is refused;
// changing any one character of a token never makes it name another
// contact; any other string is refused without a panic.
func FuzzSignerVerify(f *testing.F) {
	f.Add("ws1", "c1", "", 0, byte('x'))
	f.Add("w\x00s", "c", "a.b", 3, byte('A'))
	f.Add("", "c", strings.Repeat(".", 600), 1, byte('-'))
	f.Add("wé", "ü\xff", "eHg.eHg", 5, byte('_'))
	s, err := NewSigner("fuzz-secret", time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ws, id, other string, pos int, c byte) {
		if w, i, err := s.Verify(other); err == nil && (w == "" || i == "") {
			t.Fatalf("%q verified with an empty workspace or contact (%q, %q)", other, w, i)
		}
		tok, _ := s.Sign(ws, id)
		gotWS, gotID, err := s.Verify(tok)
		plain := ws != "" && id != "" && !strings.Contains(ws, "\x00") && !strings.Contains(id, "\x00")
		if plain && (err != nil || gotWS != ws || gotID != id) {
			t.Fatalf("Sign(%q, %q) verifies as (%q, %q, %v)", ws, id, gotWS, gotID, err)
		}
		if !plain && err == nil {
			t.Fatalf("Sign(%q, %q) verifies as (%q, %q)", ws, id, gotWS, gotID)
		}
		if len(tok) == 0 {
			return
		}
		b := []byte(tok)
		if pos < 0 {
			pos = -pos
		}
		b[pos%len(b)] = c
		if w2, i2, err := s.Verify(string(b)); err == nil && (w2 != gotWS || i2 != gotID) {
			t.Fatalf("%q changed to %q verifies as (%q, %q), not (%q, %q)", tok, b, w2, i2, gotWS, gotID)
		}
	})
}
