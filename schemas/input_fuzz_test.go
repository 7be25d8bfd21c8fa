package schemas

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzNormalizeEmail: the stored form of an address is a fixed point (one
// address, one stored form: normalising it again changes nothing), it is a
// plain local@domain within the RFC 5321 lengths, its domain is lower-case
// ASCII that NormalizeDomain also gives, its local part is lower-case NFC,
// and it holds no control, format, private-use, unassigned or space
// character, whatever the input.
func FuzzNormalizeEmail(f *testing.F) {
	for _, s := range []string{"Ann@Example.COM", " a@b.co ", "user@exämple.com", "user@xn--exmple-cua.com", "ｕ@ｅｘａｍｐｌｅ.com",
		"a\u202eb@example.com", "a\u200bb@example.com", "Ünïcödé@example.com", "a@b@example.com", "a@localhost", "\"q\"@example.com",
		"a..b@example.com", ".a@example.com", "a@[127.0.0.1]", "a@-x.com", strings.Repeat("a", 64) + "@" + strings.Repeat("b", 63) + ".com",
		"a@\u0130.com", "ß@straße.de", "a@example.com\x00", "\xff@example.com", "a@exa\u0301mple.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := NormalizeEmail(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("refusal of %q without a message", s)
			}
			return
		}
		if again, err := NormalizeEmail(e); err != nil || again != e {
			t.Fatalf("%q → %q → %q, %v: not a fixed point", s, e, again, err)
		}
		at := strings.LastIndexByte(e, '@')
		local, domain := e[:at], e[at+1:]
		if len(e) > 254 || len(local) > 64 || local == "" || strings.Contains(local, "@") || !utf8.ValidString(e) {
			t.Fatalf("%q → %q: not a plain address within the lengths", s, e)
		}
		if d, err := NormalizeDomain(domain); err != nil || d != domain || domain != strings.ToLower(domain) || !strings.Contains(domain, ".") {
			t.Fatalf("%q → domain %q (NormalizeDomain %q, %v)", s, domain, d, err)
		}
		for _, r := range domain {
			if r >= utf8.RuneSelf {
				t.Fatalf("%q → non-ASCII domain %q", s, domain)
			}
		}
		if local != strings.ToLower(local) || !norm.NFC.IsNormalString(local) {
			t.Fatalf("%q → local part %q is not lower-case NFC", s, local)
		}
		for _, r := range e {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Co, r) || unicode.IsSpace(r) ||
				r == utf8.RuneError || !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S) {
				t.Fatalf("%q → %q holds %U", s, e, r)
			}
		}
	})
}

// FuzzJSONValueEnd: the validating scanner (JSONValueEnd) and the span
// finder (SkipJSONValue) agree on where a valid JSON value ends, the span
// the validator accepts is valid JSON for encoding/json, and a whole valid
// document is one value followed only by white space (unless it nests
// deeper than the validator's bound).
func FuzzJSONValueEnd(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"c\"d"}],"e":null}`, `"x\\"`, `[]`, `-0.5e+3`, `true `, `{"a":1}{"b":2}`,
		`[1,]`, `{"a" 1}`, `"\u00"`, "\"\xff\"", `01`, `1.`, `nul`, strings.Repeat("[", 600) + strings.Repeat("]", 600), ` 5`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, ok := JSONValueEnd(b, 0)
		if ok && (end > len(b) || !json.Valid(b[:end])) {
			t.Fatalf("JSONValueEnd(%q) = %d, but %q is not valid JSON", b, end, b[:min(end, len(b))])
		}
		// The span finder stops at a delimiter without validating: it
		// agrees where the valid value is followed by one (or the end).
		if ok && (end == len(b) || bytes.IndexByte([]byte(" \t\r\n,]}"), b[end]) >= 0) {
			if send, sok := SkipJSONValue(b, 0); !sok || send != end {
				t.Fatalf("%q: SkipJSONValue ends at %d %v, JSONValueEnd at %d", b, send, sok, end)
			}
		}
		if len(b) > 0 && b[0] > ' ' && json.Valid(b) && bytes.Count(b, []byte("[")) < 500 && bytes.Count(b, []byte("{")) < 500 {
			if !ok || len(bytes.TrimSpace(b[end:])) != 0 {
				t.Fatalf("valid %q: JSONValueEnd = %d, %v", b, end, ok)
			}
		}
	})
}
