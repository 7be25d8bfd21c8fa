package schemas

import "encoding/json"

// ValidJSON reports whether b is one JSON value, surrounded by whitespace
// at most: json.Valid's answer, with the validator's table-driven string
// scan (2-3x faster on bodies of HTML). Nesting deeper than the validator's
// bound is left to json.Valid.
func ValidJSON(b []byte) bool {
	valid, _ := checkJSON(b)
	return valid
}

// CompactJSON validates p as ValidJSON does and, in the same pass, reports
// whether it has no whitespace outside strings (so AppendCompactBody may
// copy it).
func CompactJSON(p []byte) (valid, compact bool) {
	if whole, compact := wholeValue(p); whole {
		return true, compact
	}
	return ValidJSON(p), false
}

// CheckRequestJSON is CompactJSON for a request body, plus, in the same
// pass, the escape half of the HTTP edge's text rule: badEscape reports a
// string (key or value) with a \u0000 escape or a surrogate escape without
// its other half, which encoding/json would silently read as NUL or U+FFFD.
// (Raw bytes that are not UTF-8 are for the caller's utf8.Valid.) A body
// nested deeper than the validator's bound reports badEscape true: the
// caller finds out exactly.
func CheckRequestJSON(p []byte) (valid, compact, badEscape bool) {
	var v validator
	if end, ok := v.value(p, 0); ok && end == len(p) {
		return true, !v.space, v.badEscape
	}
	v = validator{}
	i := v.skipSpace(p, 0)
	end, ok := v.value(p, i)
	if !ok {
		if v.depth > maxDepth && json.Valid(p) {
			return true, false, true
		}
		return false, false, false
	}
	return v.skipSpace(p, end) == len(p), false, v.badEscape
}

// wholeValue reports whether p is one valid JSON value from its first byte
// to its last (no whitespace around it) and, if so, whether it also has
// none between its tokens. One validator pass.
func wholeValue(p []byte) (whole, compact bool) {
	var v validator
	end, ok := v.value(p, 0)
	whole = ok && end == len(p)
	return whole, whole && !v.space
}

// checkJSON validates p in one pass. valid is ValidJSON's answer; clean
// adds that json.Marshal of p as a RawMessage copies it unchanged: no
// whitespace outside strings, no <, > or &, no U+2028 or U+2029.
func checkJSON(p []byte) (valid, clean bool) {
	var v validator
	i := v.skipSpace(p, 0)
	end, ok := v.value(p, i)
	if !ok {
		return v.depth > maxDepth && json.Valid(p), false
	}
	end = v.skipSpace(p, end)
	return end == len(p), end == len(p) && !v.space && !v.escape
}

// maxDepth bounds nesting in the validator; deeper values go to
// encoding/json (whose own limit is 10000).
const maxDepth = 512

// validator checks JSON syntax as encoding/json's scanner does (any bytes
// but control characters, quotes and backslashes inside strings; numbers
// per RFC 8259) and notes what json.Marshal would change in a RawMessage.
type validator struct {
	space  bool // whitespace outside strings
	escape bool // <, >, & or U+2028/U+2029 anywhere
	depth  int
	// badEscape: a \u escape of NUL or a lone surrogate somewhere (not
	// noted for strings taken from storedStrings).
	badEscape bool
	// stored: the input was read back from the broker or a store, so long
	// strings found valid before may be taken from storedStrings.
	stored bool
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (v *validator) skipSpace(p []byte, i int) int {
	j := SkipJSONSpace(p, i)
	v.space = v.space || j > i
	return j
}

// value validates one value starting exactly at p[i] and returns the index
// just after it.
func (v *validator) value(p []byte, i int) (int, bool) {
	if i >= len(p) {
		return 0, false
	}
	switch c := p[i]; {
	case c == '{':
		return v.object(p, i)
	case c == '[':
		return v.array(p, i)
	case c == '"':
		return v.str(p, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return number(p, i)
	case c == 't':
		return literal(p, i, "true")
	case c == 'f':
		return literal(p, i, "false")
	case c == 'n':
		return literal(p, i, "null")
	}
	return 0, false
}

func (v *validator) object(p []byte, i int) (int, bool) {
	if v.depth++; v.depth > maxDepth {
		return 0, false
	}
	i = v.skipSpace(p, i+1)
	if i < len(p) && p[i] == '}' {
		v.depth--
		return i + 1, true
	}
	for {
		if i >= len(p) || p[i] != '"' {
			return 0, false
		}
		var ok bool
		if i, ok = v.str(p, i); !ok {
			return 0, false
		}
		i = v.skipSpace(p, i)
		if i >= len(p) || p[i] != ':' {
			return 0, false
		}
		if i, ok = v.value(p, v.skipSpace(p, i+1)); !ok {
			return 0, false
		}
		i = v.skipSpace(p, i)
		if i >= len(p) {
			return 0, false
		}
		switch p[i] {
		case ',':
			i = v.skipSpace(p, i+1)
		case '}':
			v.depth--
			return i + 1, true
		default:
			return 0, false
		}
	}
}

func (v *validator) array(p []byte, i int) (int, bool) {
	if v.depth++; v.depth > maxDepth {
		return 0, false
	}
	i = v.skipSpace(p, i+1)
	if i < len(p) && p[i] == ']' {
		v.depth--
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = v.value(p, i); !ok {
			return 0, false
		}
		i = v.skipSpace(p, i)
		if i >= len(p) {
			return 0, false
		}
		switch p[i] {
		case ',':
			i = v.skipSpace(p, i+1)
		case ']':
			v.depth--
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// str validates a string starting at the quote p[i]. It finds the closing
// quote first (SkipJSONString), then checks the span a word at a time for
// control characters and for what json.Marshal would escape, and looks at
// each backslash's escape.
func (v *validator) str(p []byte, i int) (int, bool) {
	end, ok := SkipJSONString(p, i)
	if !ok {
		return 0, false
	}
	if v.stored && end-i >= minStoredString {
		escape, valid := storedStrings.check(p[i:end])
		v.escape = v.escape || escape
		return end, valid
	}
	s := p[i+1 : end-1]
	ok, badEscape := scanStringSpan(s)
	if !ok {
		return 0, false
	}
	v.badEscape = v.badEscape || badEscape
	if !v.escape && marshalEscapes(s) {
		v.escape = true
	}
	return end, true
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at p[i].
func number(p []byte, i int) (int, bool) {
	if p[i] == '-' {
		i++
	}
	switch {
	case i < len(p) && p[i] == '0':
		i++
	case i < len(p) && p[i] >= '1' && p[i] <= '9':
		for i++; i < len(p) && isDigit(p[i]); i++ {
		}
	default:
		return 0, false
	}
	if i < len(p) && p[i] == '.' {
		i++
		if i >= len(p) || !isDigit(p[i]) {
			return 0, false
		}
		for i < len(p) && isDigit(p[i]) {
			i++
		}
	}
	if i < len(p) && (p[i] == 'e' || p[i] == 'E') {
		i++
		if i < len(p) && (p[i] == '+' || p[i] == '-') {
			i++
		}
		if i >= len(p) || !isDigit(p[i]) {
			return 0, false
		}
		for i < len(p) && isDigit(p[i]) {
			i++
		}
	}
	return i, true
}

func literal(p []byte, i int, lit string) (int, bool) {
	if len(p)-i < len(lit) || string(p[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}
