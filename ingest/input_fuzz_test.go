package ingest

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// FuzzDigits: Digits accepts exactly the non-empty runs of ASCII digits
// that fit an int64 (no sign, '+', space, point or exponent) and reads the
// number strconv reads.
func FuzzDigits(f *testing.F) {
	for _, s := range []string{"", "0", "5", "007", "100", "+5", " 5", "5 ", "-1", "1.5", "1e2", "0x10", "٣",
		"9223372036854775807", "9223372036854775808", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := Digits(s)
		digits := s != "" && strings.Trim(s, "0123456789") == ""
		want, err := strconv.ParseInt(s, 10, 64)
		if ok != (digits && err == nil) || (ok && n != want) {
			t.Fatalf("Digits(%q) = %d, %v; strconv %d, %v", s, n, ok, want, err)
		}
	})
}

// FuzzRedactBody: whatever the body, the request log keeps no secret: the
// redacted body of valid JSON is valid JSON in which every member whose
// decoded name contains a secret word (any case, any depth, escapes
// decoded) holds "[REDACTED]" and every attachment's content is omitted,
// and a body that names a secret word but is not valid JSON is not kept.
func FuzzRedactBody(f *testing.F) {
	for _, s := range []string{
		`{"to":"a@example.com","password":"hunter2","nested":[{"apiKey":{"x":1}},{"Client_Secret":null}]}`,
		`{"\u0070assword":"x","t\u006fken":["a"]}`,
		`{"attachments":[{"filename":"a","content":"aGVsbG8="},{"content":5}],"x":"password"}`,
		`{"password":"a","password":"b"}`, `["token",{"Authorization":"Bearer x"}]`,
		`{"secret":"x"`, `not json but a secret`, `"token"`, `{}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out := RedactBody(body)
		if !json.Valid(body) {
			if mentionsSensitive(body) && string(out) != redactedNonObj {
				t.Fatalf("invalid JSON naming a secret kept: %q", out)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("redacting %q gave invalid JSON %q", body, out)
		}
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("redacted %q: %v", out, err)
		}
		checkRedacted(t, body, out, v, false)
	})
}

// checkRedacted walks a redacted value: secret members must be redacted,
// and the contents of the objects in an attachments array omitted
// (inAttachments: v is such an array, or an object in it).
func checkRedacted(t *testing.T, body, out []byte, v any, inAttachments bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			lk := strings.ToLower(k)
			for _, w := range secretWords {
				if strings.Contains(lk, w) && e != Redacted {
					t.Fatalf("member %q of %q kept as %v in %q", k, body, e, out)
				}
			}
			if inAttachments && k == "content" {
				if s, ok := e.(string); !ok || !strings.HasPrefix(s, "[OMITTED ") {
					t.Fatalf("attachment content kept in %q", out)
				}
			}
			_, isArray := e.([]any)
			checkRedacted(t, body, out, e, k == "attachments" && isArray)
		}
	case []any:
		for _, e := range x {
			_, isObject := e.(map[string]any)
			checkRedacted(t, body, out, e, inAttachments && isObject)
		}
	}
}
