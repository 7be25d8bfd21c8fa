package schemas

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The envelope is encoded and decoded for every message on every topic, so
// the producer and the runner use these hand-written functions instead of
// encoding/json's reflection. Both are exact: AppendEnvelope produces the
// bytes json.Marshal produces and DecodeEnvelope the value json.Unmarshal
// produces (round-trip and fuzz tests in codec_test.go hold them to that).
// Each handles the canonical shape itself and hands anything unusual (a
// payload needing compaction or escaping, escaped or unknown keys, nulls,
// invalid input) to encoding/json, so the wire format is encoding/json's.

// AppendEnvelope appends the JSON encoding of env to dst and returns the
// extended buffer: byte for byte what json.Marshal(env) returns, with the
// same errors (an invalid payload, a time outside years 0-9999). On error
// dst is returned unextended. Safe for concurrent use.
func AppendEnvelope(dst []byte, env *Envelope) ([]byte, error) {
	orig := len(dst)
	b := append(dst, `{"id":`...)
	b = AppendJSONString(b, env.ID)
	b = append(b, `,"workspace":`...)
	b = AppendJSONString(b, env.Workspace)
	b = append(b, `,"type":`...)
	b = AppendJSONString(b, env.Type)
	b = append(b, `,"key":`...)
	b = AppendJSONString(b, env.Key)
	b = append(b, `,"occurredAt":"`...)
	var err error
	// AppendText is Time.MarshalJSON without the quotes: RFC 3339 with
	// nanoseconds, failing for years outside 0-9999. Its output never
	// needs escaping.
	if b, err = env.OccurredAt.AppendText(b); err != nil {
		return slowAppendEnvelope(dst[:orig], env)
	}
	b = append(b, `","attempt":`...)
	b = strconv.AppendInt(b, int64(env.Attempt), 10)
	if env.CausationID != "" {
		b = append(b, `,"causationId":`...)
		b = AppendJSONString(b, env.CausationID)
	}
	if env.Traceparent != "" {
		b = append(b, `,"traceparent":`...)
		b = AppendJSONString(b, env.Traceparent)
	}
	b = append(b, `,"payload":`...)
	switch {
	case env.Payload == nil:
		b = append(b, "null"...)
	case env.PayloadCompact && len(env.Payload) > 0:
		b = append(b, env.Payload...)
	default:
		if b, err = appendRawJSON(b, env.Payload); err != nil {
			return dst[:orig], err
		}
	}
	return append(b, '}'), nil
}

func slowAppendEnvelope(dst []byte, env *Envelope) ([]byte, error) {
	v, err := json.Marshal(env)
	if err != nil {
		return dst, err
	}
	return append(dst, v...), nil
}

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

// appendRawJSON appends raw as json.Marshal writes a json.RawMessage:
// compact, with <, >, &, U+2028 and U+2029 escaped; invalid JSON gives
// json.Marshal's error.
func appendRawJSON(b, raw []byte) ([]byte, error) {
	switch valid, clean := checkJSON(raw); {
	case clean:
		return append(b, raw...), nil
	case valid:
		return appendCompactJSON(b, raw), nil
	}
	_, err := json.Marshal(json.RawMessage(raw))
	return b, err
}

// appendCompactJSON appends the valid JSON raw as encoding/json compacts a
// RawMessage: whitespace outside strings dropped; <, >, &, U+2028 and
// U+2029 inside strings escaped; everything else copied as is (invalid
// UTF-8 included), such as the jsonb text Postgres returns ("{"a": 1}").
func appendCompactJSON(b, raw []byte) []byte {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !inString {
			if !isSpace(c) {
				b = append(b, c)
				inString = c == '"'
			}
			continue
		}
		switch {
		case c == '\\': // an escape pair: copied whole (valid JSON has its second byte)
			b = append(b, c, raw[i+1])
			i++
		case c == '"':
			b = append(b, c)
			inString = false
		case c == '<' || c == '>' || c == '&':
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		case c == 0xe2 && i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xa8:
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[raw[i+2]&0xf])
			i += 2
		default:
			b = append(b, c)
		}
	}
	return b
}

var payloadKey = []byte(`,"payload":`)

// DecodeEnvelope decodes data into env with the result and errors of
// json.Unmarshal(data, env): fields absent from data keep env's values,
// unknown fields are ignored. Unlike json.Unmarshal, env.Payload shares
// data's memory when the fast path decodes it: data must not be modified
// while env is in use. Safe for concurrent use on distinct envs. It is for
// envelopes read back from the broker: the check of the payload takes long
// strings it found valid before from memory (storedStrings). It sets
// env.PayloadCompact when it checked the payload and found it as
// AppendEnvelope writes one, so a handler that republishes it unchanged
// costs no second check.
func DecodeEnvelope(data []byte, env *Envelope) error {
	return decodeEnvelope(data, env, true)
}

// DecodeEnvelopeUnchecked is DecodeEnvelope for a consumer whose payload
// parser accepts nothing but exactly one valid JSON value: when the payload
// is the last member, as AppendEnvelope and json.Marshal write it, and
// every member that is always written came before it, env.Payload is the
// bytes between `"payload":` and the final '}' without the check that they
// are valid JSON. The parser then does that check. A payload followed by
// more members shows up as bytes after the value, which such a parser
// rejects.
func DecodeEnvelopeUnchecked(data []byte, env *Envelope) error {
	return decodeEnvelope(data, env, false)
}

func decodeEnvelope(data []byte, env *Envelope, check bool) error {
	tmp := *env
	tmp.PayloadCompact = false
	if fastDecodeEnvelope(data, &tmp, check) {
		*env = tmp
		return nil
	}
	env.PayloadCompact = false
	return json.Unmarshal(data, env)
}

// fastDecodeEnvelope decodes the shapes AppendEnvelope and encoding/json
// write: one object, no insignificant whitespace outside the payload, keys
// spelled exactly as the struct tags, string values without escapes. It
// returns false, leaving env partly written, for anything else. check false
// takes a final payload unchecked (DecodeEnvelopeUnchecked).
func fastDecodeEnvelope(data []byte, env *Envelope, check bool) bool {
	n := len(data)
	if n < 2 || data[0] != '{' {
		return false
	}
	i := 1
	if data[i] == '}' {
		return n == 2
	}
	// The string fields come before the payload (AppendEnvelope's order):
	// one copy of that head backs all of them. A plain string holds no
	// quote, so the first `,"payload":` is the key.
	seen := 0 // bit per member always written: id, workspace, type, key, occurredAt, attempt
	head := ""
	if h := bytes.Index(data, payloadKey); h > 0 {
		head = string(data[:h])
	} else if n <= 512 {
		head = string(data)
	}
	for {
		// Key: a plain string.
		if i >= n || data[i] != '"' {
			return false
		}
		ks := i + 1
		ke := ks
		for ke < n && data[ke] != '"' && data[ke] != '\\' && data[ke] >= 0x20 {
			ke++
		}
		if ke+1 >= n || data[ke] != '"' || data[ke+1] != ':' {
			return false
		}
		key := data[ks:ke]
		i = ke + 2
		if i >= n {
			return false
		}
		switch string(key) {
		case "id", "workspace", "type", "key", "causationId", "traceparent":
			end, ok := plainSpan(data, i)
			if !ok {
				return false
			}
			var s string
			if end <= len(head) {
				s = head[i+1 : end-1] // no allocation of its own
			} else {
				s = string(data[i+1 : end-1])
			}
			switch string(key) {
			case "id":
				env.ID = s
				seen |= 1
			case "workspace":
				env.Workspace = s
				seen |= 2
			case "type":
				env.Type = s
				seen |= 4
			case "key":
				seen |= 8
				if s == env.Workspace {
					s = env.Workspace // share the workspace's string
				}
				env.Key = s
			case "causationId":
				env.CausationID = s
			case "traceparent":
				env.Traceparent = s
			}
			i = end
		case "occurredAt":
			if data[i] != '"' {
				return false
			}
			e := i + 1
			for e < n && data[e] != '"' && data[e] != '\\' && data[e] >= 0x20 {
				e++
			}
			if e >= n || data[e] != '"' {
				return false
			}
			if err := env.OccurredAt.UnmarshalJSON(data[i : e+1]); err != nil {
				return false
			}
			seen |= 16
			i = e + 1
		case "attempt":
			e := i
			if e < n && data[e] == '-' {
				e++
			}
			ds := e
			for e < n && data[e] >= '0' && data[e] <= '9' {
				e++
			}
			// A plain integer of at most 18 digits without a leading zero.
			if e == ds || e-ds > 18 || (data[ds] == '0' && e-ds > 1) {
				return false
			}
			v, err := strconv.ParseInt(string(data[i:e]), 10, 64)
			if err != nil || int64(int(v)) != v {
				return false
			}
			env.Attempt = int(v)
			seen |= 32
			i = e
		case "payload":
			if !check && seen == 63 && n-1 > i && data[n-1] == '}' && !isSpace(data[i]) && !isSpace(data[n-2]) {
				env.Payload = json.RawMessage(data[i : n-1 : n-1])
				env.PayloadCompact = false // not checked
				return true
			}
			v := validator{stored: true}
			end, ok := v.value(data, i)
			if !ok {
				return false
			}
			env.Payload = json.RawMessage(data[i:end:end])
			// Checked and exactly what AppendEnvelope would write: a
			// handler republishing it is not checked again.
			env.PayloadCompact = !v.space && !v.escape
			i = end
		default:
			return false
		}
		if i >= n {
			return false
		}
		switch data[i] {
		case ',':
			i++
		case '}':
			return i+1 == n
		default:
			return false
		}
	}
}

// plainString reads a JSON string without escapes or control characters
// starting at data[i] (the opening quote) and returns its contents and the
// index after the closing quote. Invalid UTF-8 sends the caller to the slow
// path (encoding/json replaces it with U+FFFD).
func plainString(data []byte, i int) (string, int, bool) {
	end, ok := plainSpan(data, i)
	if !ok {
		return "", 0, false
	}
	return string(data[i+1 : end-1]), end, true
}

// plainSpan is plainString without the copy: it returns the index after
// the closing quote of the plain string at data[i].
func plainSpan(data []byte, i int) (int, bool) {
	if data[i] != '"' {
		return 0, false
	}
	s := i + 1
	e := s
	ascii := true
	for e < len(data) {
		c := data[e]
		if c == '"' || c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		e++
	}
	if e >= len(data) || data[e] != '"' {
		return 0, false
	}
	if !ascii && !utf8.Valid(data[s:e]) {
		return 0, false
	}
	return e + 1, true
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

// validStringSpan reports whether s, the bytes between a JSON string's
// quotes (the closing one unescaped), has no control character and only
// valid escapes.
func validStringSpan(s []byte) bool {
	ok, _ := scanStringSpan(s)
	return ok
}

// scanStringSpan is validStringSpan that also reports a \u escape of NUL,
// of a low surrogate, or of a high surrogate not followed by a low one.
func scanStringSpan(s []byte) (ok, badEscape bool) {
	if hasControl(s) {
		return false, false
	}
	for j := 0; ; {
		k := bytes.IndexByte(s[j:], '\\')
		if k < 0 {
			break
		}
		// The closing quote was not escaped, so an escape ends before it.
		j += k
		switch s[j+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			j += 2
		case 'u':
			r, ok := escapedUnit(s, j)
			if !ok {
				return false, false
			}
			j += 6
			switch {
			case r == 0 || r >= 0xDC00 && r < 0xE000:
				badEscape = true
			case r >= 0xD800 && r < 0xDC00:
				if lo, ok := escapedUnit(s, j); ok && lo >= 0xDC00 && lo < 0xE000 {
					j += 6
				} else {
					badEscape = true
				}
			}
		default:
			return false, false
		}
	}
	return true, badEscape
}

// escapedUnit decodes the \uXXXX escape at s[j] (ok false when there is
// none).
func escapedUnit(s []byte, j int) (rune, bool) {
	if j+5 >= len(s) || s[j] != '\\' || s[j+1] != 'u' {
		return 0, false
	}
	return Hex4(s[j+2 : j+6])
}

// Hex4 decodes the four hex digits of a JSON \u escape (b must hold
// exactly them); ok is false when b is not four hex digits.
func Hex4(b []byte) (r rune, ok bool) {
	if len(b) != 4 {
		return 0, false
	}
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasZeroByte reports whether any byte of x is zero (exactly: a borrow
// only starts at a zero byte).
func hasZeroByte(x uint64) bool { return (x-ones)&^x&highs != 0 }

// hasControl reports whether s holds a byte under 0x20.
func hasControl(s []byte) bool {
	for len(s) >= 8 {
		x := binary.LittleEndian.Uint64(s)
		if (x-0x20*ones)&^x&highs != 0 {
			return true
		}
		s = s[8:]
	}
	for _, c := range s {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// marshalEscapes reports whether s holds <, >, & or U+2028/U+2029, which
// json.Marshal writes escaped.
func marshalEscapes(s []byte) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		if hasZeroByte(x^('<'*ones)) || hasZeroByte(x^('>'*ones)) || hasZeroByte(x^('&'*ones)) || hasZeroByte(x^(0xE2*ones)) {
			if marshalEscapesAt(s, i, i+8) {
				return true
			}
		}
	}
	return marshalEscapesAt(s, i, len(s))
}

// marshalEscapesAt is marshalEscapes for the characters starting in s[i:j].
func marshalEscapesAt(s []byte, i, j int) bool {
	for ; i < j; i++ {
		switch c := s[i]; {
		case c == '<' || c == '>' || c == '&':
			return true
		case c == 0xE2 && i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xA8:
			return true
		}
	}
	return false
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
