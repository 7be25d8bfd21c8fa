package schemas

import (
	"encoding/json"
	"testing"
)

var jsonStringCases = []string{
	"", "plain", `"quoted" \back\slash`, "<b>&amp;</b>", "tab\tnew\nline\r\x00\x1f\b\f",
	"ünïcødé 日本語 🙂", "line\u2028para\u2029", "bad \xff utf8 \xe2\x82", string([]byte{0xed, 0xa0, 0x80}),
}

// AppendJSONString writes what encoding/json writes, and JSONStringLen
// predicts its length.
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonStringCases {
		want, _ := json.Marshal(s)
		got := AppendJSONString(nil, s)
		if string(got) != string(want) {
			t.Errorf("AppendJSONString(%q) = %s, want %s", s, got, want)
		}
		if n := JSONStringLen(s); n != len(got) {
			t.Errorf("JSONStringLen(%q) = %d, want %d", s, n, len(got))
		}
	}
}

func FuzzJSONStringLen(f *testing.F) {
	for _, s := range jsonStringCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendJSONString(%q) = %s, want %s", s, got, want)
		}
		if n := JSONStringLen(s); n != len(want) {
			t.Fatalf("JSONStringLen(%q) = %d, want %d", s, n, len(want))
		}
	})
}
