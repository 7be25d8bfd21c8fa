package ingest

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"sendstream/schemas"
)

// Text rules of the HTTP edge, applied to every route in one place before
// its handler runs, so a refused request changes nothing:
//
//   - every string of a JSON body, object keys included, must be valid
//     UTF-8 without NUL: a "\u0000" escape, raw bytes that are not UTF-8 and
//     a lone surrogate escape ("\ud800" without its low half, which
//     encoding/json would silently turn into U+FFFD) answer 400
//     invalid_text with fields naming the JSON paths ("firstName",
//     "metadata.note", "events[2].name");
//   - every query parameter, name and value, must be well-formed
//     percent-encoding ("%ZZ" and a trailing "%" are not) that decodes to
//     such text: 400 invalid_text with fields naming the parameters;
//   - a path parameter holding NUL, invalid UTF-8 or a malformed escape
//     names nothing that can exist: 404 not_found.
//
// Routes that read their bodies themselves (Route.RawBody) apply the body
// rule with CheckBodyText.

// codeInvalidText is the error code of a refused string.
const codeInvalidText = "invalid_text"

// maxTextFields bounds how many failing paths one answer names (a 16 MB
// body could hold a million); the message says how many there were.
const maxTextFields = 20

// checkBodyText applies the text rule to a body that the validator found
// to be valid JSON, reporting badEscape (schemas.CheckRequestJSON). The
// common case costs one utf8.Valid pass on top of that; only a body that
// may break the rule is walked to name the paths.
func checkBodyText(body []byte, badEscape bool) (Result, bool) {
	if !badEscape && utf8.Valid(body) {
		return Result{}, true
	}
	var w textWalker
	w.value(body, schemas.SkipJSONSpace(body, 0), "")
	if w.count == 0 {
		return Result{}, true
	}
	return invalidText(w.count, "string", w.fields), false
}

// hex4 decodes the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	return schemas.Hex4(b[i : i+4])
}

func isHighSurrogate(r rune) bool { return r >= 0xD800 && r < 0xDC00 }
func isLowSurrogate(r rune) bool  { return r >= 0xDC00 && r < 0xE000 }

// textWalker walks a valid JSON document and collects the paths of the
// strings the text rule refuses.
type textWalker struct {
	count  int
	fields []string
}

func (w *textWalker) bad(path string) {
	w.count++
	if len(w.fields) < maxTextFields {
		if path == "" {
			path = "(body)"
		}
		w.fields = append(w.fields, path)
	}
}

// value walks the valid JSON value at b[i] and returns the index after it.
func (w *textWalker) value(b []byte, i int, path string) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		end, _ := schemas.SkipJSONString(b, i)
		if !validJSONText(b[i+1 : end-1]) {
			w.bad(path)
		}
		return end
	case '{':
		i = schemas.SkipJSONSpace(b, i+1)
		for i < len(b) && b[i] == '"' {
			kEnd, _ := schemas.SkipJSONString(b, i)
			key := b[i+1 : kEnd-1]
			sub := joinPath(path, key)
			if !validJSONText(key) {
				w.bad(sub)
			}
			i = schemas.SkipJSONSpace(b, kEnd)
			i = schemas.SkipJSONSpace(b, i+1) // past ':'
			i = schemas.SkipJSONSpace(b, w.value(b, i, sub))
			if i < len(b) && b[i] == ',' {
				i = schemas.SkipJSONSpace(b, i+1)
			}
		}
		return i + 1 // past '}'
	case '[':
		i = schemas.SkipJSONSpace(b, i+1)
		for n := 0; i < len(b) && b[i] != ']'; n++ {
			i = schemas.SkipJSONSpace(b, w.value(b, i, path+"["+strconv.Itoa(n)+"]"))
			if i < len(b) && b[i] == ',' {
				i = schemas.SkipJSONSpace(b, i+1)
			}
		}
		return i + 1 // past ']'
	}
	end, _ := schemas.SkipJSONValue(b, i)
	return end
}

// joinPath appends the member key (the raw bytes between its quotes) to
// path, decoded and made printable: what the rule refuses becomes U+FFFD.
func joinPath(path string, rawKey []byte) string {
	key, _ := schemas.JSONString(append(append([]byte{'"'}, rawKey...), '"'))
	key = printable(key)
	if path == "" {
		return key
	}
	return path + "." + key
}

// printable replaces NUL and invalid UTF-8 in s with U+FFFD, so a refused
// name can be quoted back in an answer.
func printable(s string) string {
	if ValidText(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// validJSONText reports whether the JSON string span s (the bytes between
// the quotes of a valid JSON string) decodes to valid UTF-8 without NUL and
// without lone surrogate escapes.
func validJSONText(s []byte) bool {
	if bytes.IndexByte(s, '\\') < 0 {
		return utf8.Valid(s) // valid JSON has no raw control byte, so no NUL
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if s[i+1] != 'u' {
				i += 2
				continue
			}
			r, _ := hex4(s, i+2)
			i += 6
			switch {
			case r == 0 || isLowSurrogate(r):
				return false
			case isHighSurrogate(r):
				lo, ok := hex4(s, i+2)
				if !ok || s[i] != '\\' || s[i+1] != 'u' || !isLowSurrogate(lo) {
					return false
				}
				i += 6
			}
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n == 1 {
				return false
			}
			i += n
		}
	}
	return true
}

// ValidText reports whether s is text the API accepts: valid UTF-8 with no
// NUL. Handlers that decode input themselves use it; the server applies it
// to JSON bodies, query parameters and path parameters.
func ValidText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// invalidText is the 400 answer naming fields (at most maxTextFields of
// count) whose text the rule refuses; what says what they are.
func invalidText(count int, what string, fields []string) Result {
	msg := "Invalid text: "
	if count == 1 {
		msg += "a " + what + " holds"
	} else {
		msg += strconv.Itoa(count) + " " + what + "s hold"
	}
	msg += " NUL (\\u0000), invalid UTF-8 or a lone surrogate escape, or malformed percent-encoding; nothing was done"
	return Fail(400, codeInvalidText, msg, fields...)
}

// checkQueryText applies the text rule to a raw (still percent-encoded)
// query string. A query of plain ASCII without escapes passes at once.
func checkQueryText(raw []byte) (Result, bool) {
	plain := bytes.IndexByte(raw, '%') < 0
	for i := 0; plain && i < len(raw); i++ {
		plain = raw[i] != 0 && raw[i] < utf8.RuneSelf
	}
	if plain {
		return Result{}, true
	}
	n, fields := badPairs(raw)
	if n == 0 {
		return Result{}, true
	}
	return invalidText(n, "parameter", fields), false
}

// badPairs returns how many name=value pairs of the form-encoded raw break
// the text rule, and the (printable, decoded) names of the first ones.
func badPairs(raw []byte) (n int, names []string) {
	for len(raw) > 0 {
		pair := raw
		if j := bytes.IndexByte(raw, '&'); j >= 0 {
			pair, raw = raw[:j], raw[j+1:]
		} else {
			raw = nil
		}
		k, v := pair, []byte(nil)
		if j := bytes.IndexByte(pair, '='); j >= 0 {
			k, v = pair[:j], pair[j+1:]
		}
		name, okName := formDecode(k)
		value, okValue := formDecode(v)
		if okName && okValue && ValidText(name) && ValidText(value) {
			continue
		}
		n++
		if len(names) < maxTextFields {
			names = append(names, printable(name))
		}
	}
	return n, names
}

// formDecode decodes one application/x-www-form-urlencoded component:
// "+" is a space, "%XY" a byte; ok is false for a malformed escape.
func formDecode(s []byte) (string, bool) {
	if bytes.IndexByte(s, '%') < 0 && bytes.IndexByte(s, '+') < 0 {
		return string(s), true
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			out = append(out, ' ')
		case '%':
			hi, ok1 := unhex(s, i+1)
			lo, ok2 := unhex(s, i+2)
			if !ok1 || !ok2 {
				return string(out), false
			}
			out = append(out, hi<<4|lo)
			i += 2
		default:
			out = append(out, c)
		}
	}
	return string(out), true
}

func unhex(s []byte, i int) (byte, bool) {
	if i >= len(s) {
		return 0, false
	}
	switch c := s[i]; {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// validPath reports whether a matched request may name something that
// exists: its raw path has no malformed percent-escape and every path
// parameter (spans of the decoded path) is valid text.
func validPath(rawPath, path []byte, spans []paramSpan) bool {
	for i := bytes.IndexByte(rawPath, '%'); i >= 0; {
		if _, ok := unhex(rawPath, i+1); !ok {
			return false
		}
		if _, ok := unhex(rawPath, i+2); !ok {
			return false
		}
		next := bytes.IndexByte(rawPath[i+3:], '%')
		if next < 0 {
			break
		}
		i += 3 + next
	}
	for _, sp := range spans {
		p := path[sp.start:sp.end]
		if !utf8.Valid(p) || bytes.IndexByte(p, 0) >= 0 {
			return false
		}
	}
	return true
}

// CheckBodyText applies the text rule to the body of a call on a route
// that reads its body itself (Route.RawBody): a JSON body (Content-Type
// application/json or +json) is walked like the server walks the bodies
// of JSON routes, any other body is read as form fields
// (application/x-www-form-urlencoded). ok false means res is the 400
// invalid_text answer naming the fields. A JSON body that is not valid
// JSON passes: the handler's own decoding answers that.
func CheckBodyText(c *Call) (res Result, ok bool) {
	ct := strings.ToLower(c.Header("Content-Type"))
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	if ct == "application/json" || strings.HasSuffix(ct, "+json") {
		valid, _, badEscape := schemas.CheckRequestJSON(c.Body)
		if !valid {
			return Result{}, true
		}
		return checkBodyText(c.Body, badEscape)
	}
	return checkQueryText(c.Body)
}

// checkURLText applies the text rules to the path parameters (404 when one
// cannot name anything) and the query string (400 invalid_text).
func checkURLText(rc *fasthttp.RequestCtx, spans []paramSpan) (Result, bool) {
	if !validPath(rc.URI().PathOriginal(), rc.Path(), spans) {
		return Fail(404, "not_found", "Not found: the path holds NUL, invalid UTF-8 or a malformed percent-escape, so it names nothing that exists"), false
	}
	return checkQueryText(rc.URI().QueryString())
}
