package schemas

import "testing"

func TestCheckRequestJSON(t *testing.T) {
	for _, c := range []struct {
		in                        string
		valid, compact, badEscape bool
	}{
		{`{"a":"b"}`, true, true, false},
		{` {"a": "b"}` + "\n", true, false, false},
		{`{"a":"\u0000"}`, true, true, true},
		{`{"\u0000":1}`, true, true, true},
		{`["\ud800"]`, true, true, true},
		{`["\ud800x"]`, true, true, true},
		{`["\udc00"]`, true, true, true},
		{`["\ud800\ud800"]`, true, true, true},
		{`["\ud83d\ude00"]`, true, true, false},
		{`["\uD83D\uDE00", "\u00e9"]`, true, false, false},
		{`["\\u0000"]`, true, true, false},
		{`["\\\u0000"]`, true, true, true},
		{"[\"\xff\"]", true, true, false}, // raw bytes: the caller's utf8.Valid
		{`{"a":"\u00"}`, false, false, false},
		{`{"a":`, false, false, false},
	} {
		v, cp, bad := CheckRequestJSON([]byte(c.in))
		if v != c.valid || (v && (cp != c.compact || bad != c.badEscape)) {
			t.Errorf("CheckRequestJSON(%q) = %v %v %v, want %v %v %v", c.in, v, cp, bad, c.valid, c.compact, c.badEscape)
		}
		if v != ValidJSON([]byte(c.in)) {
			t.Errorf("CheckRequestJSON(%q) valid=%v disagrees with ValidJSON", c.in, v)
		}
	}
}
