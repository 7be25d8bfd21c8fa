package transactional

import (
	"bytes"
	"strings"
	"testing"

	"github.com/buger/jsonparser"

	"sendstream/schemas"
)

// The source cache gives what decoding gives, with the JSON encoding
// schemas.AppendJSONString writes; per workspace; within its bound.
func TestSourceCache(t *testing.T) {
	long := strings.Repeat(`<p class=\"x\">Hi {{ name }} \u0026 \u003cb\u003e é \u2028</p>\n`, 20)
	c := newSourceCache(8 * len(long)) // two entries of about 3.3 × len(long) each
	want, err := jsonparser.ParseString([]byte(long))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // a miss, then a hit
		text, enc, err := c.get("ws1", []byte(long))
		if err != nil || text != want || !bytes.Equal(enc, schemas.AppendJSONString(nil, want)) {
			t.Fatalf("get #%d: %q, %s, %v", i, text, enc, err)
		}
	}
	if n := len(c.byWS["ws1"]); n != 1 {
		t.Fatalf("ws1 holds %d sources, want 1", n)
	}
	if _, _, err := c.get("ws2", []byte(long)); err != nil || len(c.byWS) != 2 {
		t.Fatalf("another workspace's copy: %v, %d workspaces", err, len(c.byWS))
	}
	// Past the bound the cache starts over.
	other := strings.Replace(long, "Hi", "Ho", 1)
	if _, _, err := c.get("ws1", []byte(other)); err != nil || c.bytes > c.max || len(c.byWS) != 1 {
		t.Fatalf("bound: %v, %d of %d bytes, %d workspaces", err, c.bytes, c.max, len(c.byWS))
	}
	// Short sources are not kept; broken escapes fail as decoding does.
	if text, enc, err := c.get("ws1", []byte(`Hi \u003c`)); err != nil || text != "Hi <" || enc != nil {
		t.Fatalf("short source: %q, %s, %v", text, enc, err)
	}
	if _, _, err := c.get("ws1", []byte(long+`\q`)); err == nil {
		t.Fatal("a broken escape decoded")
	}
	// A nil cache decodes.
	if text, enc, err := (*sourceCache)(nil).get("ws1", []byte(long)); err != nil || text != want || enc != nil {
		t.Fatalf("nil cache: %v", err)
	}
}
