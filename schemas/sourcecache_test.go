package schemas

import (
	"bytes"
	"strings"
	"testing"

	"github.com/buger/jsonparser"
)

// The source cache gives what decoding gives, with the JSON encoding
// AppendJSONString writes when it keeps encodings; per workspace; within
// its bound.
func TestSourceCache(t *testing.T) {
	long := strings.Repeat(`<p class=\"x\">Hi {{ name }} \u0026 \u003cb\u003e é \u2028</p>\n`, 20)
	c := NewSourceCache(8*len(long), true) // two entries of about 3.3 × len(long) each
	want, err := jsonparser.ParseString([]byte(long))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // a miss, then a hit
		text, enc, err := c.Get("ws1", []byte(long), jsonparser.ParseString)
		if err != nil || text != want || !bytes.Equal(enc, AppendJSONString(nil, want)) {
			t.Fatalf("get #%d: %q, %s, %v", i, text, enc, err)
		}
	}
	if n := len(c.byWS["ws1"]); n != 1 {
		t.Fatalf("ws1 holds %d sources, want 1", n)
	}
	if _, _, err := c.Get("ws2", []byte(long), jsonparser.ParseString); err != nil || len(c.byWS) != 2 {
		t.Fatalf("another workspace's copy: %v, %d workspaces", err, len(c.byWS))
	}
	// Past the bound the cache starts over.
	other := strings.Replace(long, "Hi", "Ho", 1)
	if _, _, err := c.Get("ws1", []byte(other), jsonparser.ParseString); err != nil || c.bytes > c.max || len(c.byWS) != 1 {
		t.Fatalf("bound: %v, %d of %d bytes, %d workspaces", err, c.bytes, c.max, len(c.byWS))
	}
	// Short sources are not kept; broken escapes fail as decoding does.
	if text, enc, err := c.Get("ws1", []byte(`Hi \u003c`), jsonparser.ParseString); err != nil || text != "Hi <" || enc != nil {
		t.Fatalf("short source: %q, %s, %v", text, enc, err)
	}
	if _, _, err := c.Get("ws1", []byte(long+`\q`), jsonparser.ParseString); err == nil {
		t.Fatal("a broken escape decoded")
	}
	// A nil cache decodes.
	if text, enc, err := (*SourceCache)(nil).Get("ws1", []byte(long), jsonparser.ParseString); err != nil || text != want || enc != nil {
		t.Fatalf("nil cache: %v", err)
	}
}

// Without encodings the cache keeps texts alone, and a hit gives the text
// the first decode made.
func TestSourceCacheWithoutEncodings(t *testing.T) {
	long := []byte(strings.Repeat(`Hi \u003cb\u003e {{ name }} `, 40))
	c := NewSourceCache(1<<20, false)
	calls := 0
	decode := func(raw []byte) (string, error) { calls++; return jsonparser.ParseString(raw) }
	want, _ := jsonparser.ParseString(long)
	for i := 0; i < 3; i++ {
		if text, enc, err := c.Get("ws1", long, decode); err != nil || text != want || enc != nil {
			t.Fatalf("get #%d: %q, %q, %v", i, text, enc, err)
		}
	}
	if calls != 1 {
		t.Fatalf("decoded %d times, want once", calls)
	}
}
