package ingest

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"sendstream/schemas"
)

// secretWords are the substrings (lower case) that make an object key a
// secret: its value, whatever its type, is replaced by "[REDACTED]".
var secretWords = []string{"password", "secret", "token", "authorization", "apikey", "api_key", "api-key", "credential"}

// Redacted replaces the value of a secret field; omitted replaces an
// attachment's content.
const (
	Redacted       = "[REDACTED]"
	redactedNonObj = "[REDACTED: body is not valid JSON and names a secret]"
)

// RedactBody returns body with the value of every object field whose name
// contains a secret word (case-insensitive, at any depth, in arrays too)
// replaced by "[REDACTED]", and the "content" of every object in an
// "attachments" array replaced by "[OMITTED n bytes]" (n: decoded size of a
// base64 content, else its length). Key order and everything else are kept
// byte for byte. A body that names none of those words is returned as is
// without parsing (the fast path); a body that does but is not valid JSON is
// replaced whole, since its secrets cannot be located.
func RedactBody(body []byte) []byte {
	if len(body) == 0 || !mentionsSensitive(body) {
		return body
	}
	if !schemas.ValidJSON(body) {
		return []byte(redactedNonObj)
	}
	r := redactor{in: body, out: make([]byte, 0, len(body))}
	r.value(false, false)
	r.out = append(r.out, r.in[r.pos:]...)
	return r.out
}

// firstOf maps a byte to the second letter (lower case) that a sensitive
// word starting with it needs, or 0 when no word starts with that byte; it
// lets the scan skip most bytes with one table load.
var firstOf = func() (t [256]byte) {
	for _, w := range append(secretWords, "attachments") {
		t[w[0]], t[w[0]-'a'+'A'] = 1, 1
	}
	t['\\'] = 1
	return t
}()

// mentionsSensitive is the fast path: a case-insensitive scan for any secret
// word or "attachments" inside an object key (anywhere, for a body that is
// not a JSON object or array). A \u escape also counts, since it could
// spell a secret key name.
func mentionsSensitive(b []byte) bool {
	jsonish := jsonContainer(b)
	for i := 0; i+1 < len(b); i++ {
		if firstOf[b[i]] == 0 {
			continue
		}
		rest := b[i:]
		var hit bool
		switch b[i] | 0x20 {
		case '\\' | 0x20:
			hit = b[i] == '\\' && b[i+1] == 'u'
		case 'p':
			hit = hasFoldPrefix(rest, "password")
		case 's':
			hit = hasFoldPrefix(rest, "secret")
		case 't':
			hit = hasFoldPrefix(rest, "token")
		case 'c':
			hit = hasFoldPrefix(rest, "credential")
		case 'a':
			switch b[i+1] | 0x20 {
			case 'u':
				hit = hasFoldPrefix(rest, "authorization")
			case 'p':
				hit = hasFoldPrefix(rest, "apikey") || hasFoldPrefix(rest, "api_key") || hasFoldPrefix(rest, "api-key")
			case 't':
				hit = hasFoldPrefix(rest, "attachments")
			}
		}
		if !hit {
			continue
		}
		if !jsonish {
			return true
		}
		key, end := inKey(b, i)
		if key {
			return true
		}
		i = end // the rest of this value string holds no key
	}
	return false
}

// jsonContainer reports whether b, after leading whitespace, starts an
// object or an array.
func jsonContainer(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

// inKey reports whether position i is inside an object key: the string it
// is in closes and is followed by a colon. Values that merely contain a
// word ("kind":"api_key") or an escape ("<" as \u003c) then keep the fast
// path. end is the position of the string's closing quote.
func inKey(b []byte, i int) (key bool, end int) {
	j := i
	for j < len(b) && b[j] != '"' {
		if b[j] == '\\' {
			j++
		}
		j++
	}
	end = j
	j = schemas.SkipJSONSpace(b, j+1)
	return j < len(b) && b[j] == ':', end
}

// hasFoldPrefix reports whether b starts with lower-case ASCII w, ignoring case.
func hasFoldPrefix(b []byte, w string) bool {
	if len(b) < len(w) {
		return false
	}
	for j := 0; j < len(w); j++ {
		c := b[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[j] {
			return false
		}
	}
	return true
}

func isSecretKey(k []byte) bool {
	for i := range k {
		for _, w := range secretWords {
			if hasFoldPrefix(k[i:], w) {
				return true
			}
		}
	}
	return false
}

// redactor copies valid JSON from in to out, rewriting values as it goes.
// in[:pos] has been handled (copied or replaced); out holds the result so far.
type redactor struct {
	in  []byte
	pos int
	out []byte
}

func (r *redactor) ws() {
	j := schemas.SkipJSONSpace(r.in, r.pos)
	r.out = append(r.out, r.in[r.pos:j]...)
	r.pos = j
}

// value handles one JSON value at pos. inAttachments: the value is an
// element of an "attachments" array; isAttachments: it is that array.
func (r *redactor) value(inAttachments, isAttachments bool) {
	r.ws()
	if r.pos >= len(r.in) {
		return
	}
	switch r.in[r.pos] {
	case '{':
		r.object(inAttachments)
	case '[':
		r.out = append(r.out, '[')
		r.pos++
		for {
			r.ws()
			if r.in[r.pos] == ']' {
				r.out = append(r.out, ']')
				r.pos++
				return
			}
			r.value(isAttachments, false)
			r.ws()
			if r.in[r.pos] == ',' {
				r.out = append(r.out, ',')
				r.pos++
			}
		}
	default:
		end := skipValue(r.in, r.pos)
		r.out = append(r.out, r.in[r.pos:end]...)
		r.pos = end
	}
}

func (r *redactor) object(isAttachment bool) {
	r.out = append(r.out, '{')
	r.pos++
	for {
		r.ws()
		if r.in[r.pos] == '}' {
			r.out = append(r.out, '}')
			r.pos++
			return
		}
		kend := skipString(r.in, r.pos)
		rawKey := r.in[r.pos:kend]
		r.out = append(r.out, rawKey...)
		r.pos = kend
		r.ws()
		r.out = append(r.out, ':') // the colon
		r.pos++
		r.ws()
		name := keyName(rawKey)
		switch {
		case isSecretKey(name):
			r.pos = skipValue(r.in, r.pos)
			r.out = strconv.AppendQuote(r.out, Redacted)
		case isAttachment && bytes.EqualFold(name, []byte("content")):
			end := skipValue(r.in, r.pos)
			r.out = strconv.AppendQuote(r.out, "[OMITTED "+strconv.Itoa(contentSize(r.in[r.pos:end]))+" bytes]")
			r.pos = end
		default:
			r.value(false, bytes.EqualFold(name, []byte("attachments")))
		}
		r.ws()
		if r.in[r.pos] == ',' {
			r.out = append(r.out, ',')
			r.pos++
		}
	}
}

// keyName returns the unescaped name of a raw JSON string key.
func keyName(raw []byte) []byte {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return inner
	}
	return []byte(s)
}

// contentSize is the decoded size of a base64 string value, or the length
// of any other value.
func contentSize(raw []byte) int {
	if len(raw) < 2 || raw[0] != '"' {
		return len(raw)
	}
	s := raw[1 : len(raw)-1]
	if len(s)%4 != 0 || bytes.IndexByte(s, '\\') >= 0 {
		return len(s)
	}
	n := len(s) / 4 * 3
	if len(s) > 0 && s[len(s)-1] == '=' {
		n--
		if len(s) > 1 && s[len(s)-2] == '=' {
			n--
		}
	}
	return n
}

// skipString returns the index just past the JSON string starting at i.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the JSON value starting at i
// (valid JSON assumed).
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j
			}
			j++
		}
		return j
	}
}

// redactCapped is capBody(RedactBody(body), n) without redacting what the
// cap drops. When a JSON body is longer than n and its first n+1 bytes name
// no sensitive key, redaction could only change bytes after them (a value
// is replaced after its key and colon), so the redacted body starts with
// the same n+1 bytes and the cut is taken from body itself: a 20 KB page of
// contacts is scanned for 8 KB instead of whole. An invalid JSON body that
// names a secret only past the cap is then stored cut rather than replaced
// whole; either way no secret is stored.
func redactCapped(body []byte, n int) (string, bool) {
	if n > 0 && len(body) > n {
		if jsonContainer(body) && !mentionsSensitive(body[:n+1]) {
			return capBody(body, n)
		}
	}
	return capBody(RedactBody(body), n)
}

// capBody cuts b to at most n bytes on a UTF-8 boundary and reports whether
// it cut.
func capBody(b []byte, n int) (string, bool) {
	if n <= 0 || len(b) <= n {
		return string(b), false
	}
	cut := n
	for cut > 0 && cut > n-utf8.UTFMax && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]), true
}
