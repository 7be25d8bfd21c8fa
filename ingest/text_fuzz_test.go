package ingest

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"sendstream/ingest/auth"
	"sendstream/schemas"
)

// literalReplacements counts the U+FFFD the JSON text b spells out itself
// (raw, or as a \ufffd escape), so that any further U+FFFD in what
// encoding/json decodes is a replacement of invalid input.
func literalReplacements(b []byte) int {
	n := bytes.Count(b, []byte("\uFFFD"))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] == 'u' && strings.EqualFold(string(b[i+2:i+6]), "fffd") {
			n++
		}
		i++ // the escaped character
	}
	return n
}

// textRuleOracle says whether the valid JSON b breaks the text rule, using
// encoding/json: some decoded string (key or value) holds NUL, or decoding
// replaced something (invalid UTF-8, a lone surrogate) with U+FFFD.
func textRuleOracle(b []byte) (bad bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	replacements := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return false // deeper than the decoder goes: not judged
		}
		if s, ok := tok.(string); ok {
			if strings.IndexByte(s, 0) >= 0 {
				return true
			}
			replacements += strings.Count(s, "\uFFFD")
		}
	}
	return replacements > literalReplacements(b)
}

// FuzzBodyText checks the body text rule (the validator's badEscape plus
// utf8.Valid, and the walk on its own) against encoding/json's decoding on
// any valid JSON.
func FuzzBodyText(f *testing.F) {
	for _, s := range []string{
		`{"a":"b"}`, `{"a":"\u0000"}`, `{"a\u0000":1}`, `["\ud800"]`, `"\udc00x"`, `{"a":"\ud83d\ude00"}`,
		`{"a":"\\u0000"}`, `{"a":"\\\u0000"}`, "{\"a\":\"\xff\"}", `{"a":["x",{"b":"\uD800\u0041"}]}`, `"\ufffd"`,
		"\"\xef\xbf\xbd\"", `{"a":"\uDBFF\uDFFF"}`, `[1,true,null,{"":""}]`, `{"x":"\ud800\ud800\udc00"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid, _, badEscape := schemas.CheckRequestJSON(b)
		if valid != schemas.ValidJSON(b) {
			t.Fatalf("CheckRequestJSON(%q) valid=%v, ValidJSON disagrees", b, valid)
		}
		if !valid {
			return
		}
		want := !textRuleOracle(b)
		res, ok := checkBodyText(b, badEscape)
		if ok != want {
			t.Fatalf("checkBodyText(%q) ok=%v (badEscape %v), encoding/json says %v", b, ok, badEscape, want)
		}
		if _, walked := checkBodyText(b, true); walked != want {
			t.Fatalf("the walk of %q says ok=%v, encoding/json says %v", b, walked, want)
		}
		if !ok {
			e := res.Body.(ErrorBody)
			if res.Status != 400 || e.Code != codeInvalidText || len(e.Fields) == 0 {
				t.Fatalf("checkBodyText(%q): %+v", b, res)
			}
			for _, f := range e.Fields {
				if !ValidText(f) {
					t.Fatalf("checkBodyText(%q) names a field that is not text: %q", b, f)
				}
			}
		}
	})
}

// FuzzQueryAndPathText runs requests with arbitrary query strings and path
// segments through the server: a query passes exactly when every name and
// value is well-formed percent-encoding (net/url's reading) of text without
// NUL, and then the handler sees only such text; a path segment reaches
// the handler exactly when it decodes so, else the answer is 404.
func FuzzQueryAndPathText(f *testing.F) {
	for _, s := range [][2]string{
		{"a=b", "x"}, {"before=%00", "%00"}, {"to=%FF", "%FF"}, {"x=%ZZ", "a%00b"}, {"x=%", "a%"},
		{"a=%C3%A9&b=+", "%C3%A9"}, {"%00=1", "%ZZ"}, {"a&b=&=c", "%ED%A0%80"}, {"k=%e2%82", "caf%C3%A9"},
	} {
		f.Add(s[0], s[1])
	}
	key := "ss_live_" + "0123456789012345678901234567890123456789"
	s, err := New(Config{}, Deps{Auth: oneKey{auth.Hash(key)}, Publisher: nopPublisher{}, Metrics: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	var seen []string
	s.Add(Route{Method: "GET", Path: "/t/{id}", Credential: CredNone, Handle: func(c *Call) Result {
		seen = append(seen[:0], c.Params["id"])
		for _, name := range []string{"a", "b", "to", "before", "x", "k"} {
			seen = append(seen, c.Query(name))
		}
		return OK(200, nil)
	}})
	f.Fuzz(func(t *testing.T, query, seg string) {
		if seg == "" || strings.ContainsAny(seg, "/?#\\") || hasCTL(seg) {
			return // not one raw path segment
		}
		if strings.ContainsAny(query, "#\\") || hasCTL(query) {
			return // not a raw query string (a request line has no control bytes)
		}
		dec, perr := url.PathUnescape(seg)
		if perr == nil && (strings.Contains(dec, "/") || dec == "." || dec == "..") {
			return // the server's path normalisation changes the route
		}
		seen = seen[:0]
		st, b := do(s, "GET", "/t/"+seg+"?"+query, "", "")
		segOK := perr == nil && ValidText(dec)
		queryOK := true
		for _, pair := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(pair, "=")
			dk, e1 := url.QueryUnescape(k)
			dv, e2 := url.QueryUnescape(v)
			if e1 != nil || e2 != nil || !ValidText(dk) || !ValidText(dv) {
				queryOK = false
			}
		}
		switch {
		case !segOK:
			if st != 404 {
				t.Fatalf("segment %q: %d %s, want 404", seg, st, b)
			}
		case !queryOK:
			if st != 400 || !bytes.Contains(b, []byte(`"code":"invalid_text"`)) || !bytes.Contains(b, []byte(`"fields":[`)) {
				t.Fatalf("query %q: %d %s, want 400 invalid_text", query, st, b)
			}
		default:
			if st != 200 {
				t.Fatalf("segment %q query %q: %d %s, want 200", seg, query, st, b)
			}
			if seen[0] != dec {
				t.Fatalf("segment %q reached the handler as %q, want %q", seg, seen[0], dec)
			}
			for _, v := range seen {
				if !ValidText(v) {
					t.Fatalf("query %q: the handler saw %q", query, v)
				}
			}
		}
	})
}

// hasCTL reports whether s holds a space or an ASCII control byte, which
// no request target carries raw.
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}
