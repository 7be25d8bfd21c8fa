package schemas

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestBodyForms: a clean JSON object or array is written as itself, any
// other text as a string, and both read back to the same text, through
// AppendBody and through encoding/json.
func TestBodyForms(t *testing.T) {
	cases := []struct {
		text string
		raw  bool // written as JSON rather than as a string
	}{
		{`{"a":1,"b":[true,null,"x"]}`, true},
		{`[1,2]`, true},
		{`{}`, true},
		{`{"a": 1}`, false}, // whitespace outside strings
		{"{\"a\":1}\n", false},
		{`{"a":"<b> & </b>","s":" "}`, true},
		{`{"a":"` + "\u2028" + `"}`, true},
		{`{"cut":"abc`, false}, // cut at the cap
		{`not json`, false},
		{`"a string"`, false},
		{`12`, false},
		{``, false},
		{`{"a":1}x`, false},
		{strings.Repeat("[", 600) + strings.Repeat("]", 600), false}, // beyond the validator's depth
	}
	for _, c := range cases {
		got := AppendBody(nil, c.text)
		if raw := len(got) > 0 && got[0] != '"'; raw != c.raw {
			t.Errorf("AppendBody(%q) = %s: raw %v, want %v", c.text, got, raw, c.raw)
		}
		if m, err := json.Marshal(Body(c.text)); err != nil || !sameJSON(m, got) {
			t.Errorf("json.Marshal(Body(%q)) = %s, %v; AppendBody wrote %s", c.text, m, err, got)
		}
		var back Body
		if err := json.Unmarshal(got, &back); err != nil || string(back) != c.text {
			t.Errorf("Body %s read back as %q, %v; want %q", got, back, err, c.text)
		}
		// Whatever a caller may promise compact, AppendCompactBody writes
		// as AppendBody does.
		if compact := c.raw || c.text == "" || (c.text[0] != '{' && c.text[0] != '['); compact {
			if cb := AppendCompactBody(nil, c.text); string(cb) != string(got) {
				t.Errorf("AppendCompactBody(%q) = %s; AppendBody wrote %s", c.text, cb, got)
			}
		}
	}
}

func FuzzBodyRoundTrip(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a": 1}`, `[`, "{\"a\":\"\xff\"}", `{"a":"\u003c"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := AppendBody(nil, text)
		var back Body
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("Body %q wrote %s, which does not read back: %v", text, got, err)
		}
		if got[0] != '"' && string(back) != text {
			t.Fatalf("raw Body %q read back as %q", text, back)
		}
		if m, err := json.Marshal(Body(text)); err != nil || !sameJSON(m, got) {
			t.Fatalf("json.Marshal(Body(%q)) = %s, %v; AppendBody wrote %s", text, m, err, got)
		}
	})
}

// sameJSON reports whether a and b are the same JSON value, or the same
// bytes (json.Marshal may differ from AppendBody only by escaping <, >, &,
// U+2028 and U+2029, and in invalid UTF-8 inside a string body).
func sameJSON(a, b []byte) bool {
	if string(a) == string(b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
