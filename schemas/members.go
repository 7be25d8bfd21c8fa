package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The hand decoders of payloads every stage reads (DecodeEventPayload,
// DecodeSendPayload) walk an object's members once and decode each by
// name with these helpers.

// walkObject calls set with the name as written (escapes are not decoded:
// names are matched exactly) and the raw value of each member of the JSON
// object b, in order, in one pass without reflection. Names are checked as
// JSON strings; a string value's span is found by its quotes (set decodes
// it, or passes it to skipMember), a container's or scalar's is checked
// with json.Valid; malformed JSON, anything but one object, or set's first
// error ends the walk. what prefixes syntax errors.
func walkObject(b []byte, what string, set func(key string, v []byte) error) error {
	i := evSkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errors.New(what + ": not a JSON object")
	}
	i = evSkipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return evTrailing(b, i+1, what)
	}
	for i < len(b) {
		if b[i] != '"' {
			return evSyntaxAt(i, what)
		}
		var vd validator
		kEnd, ok := vd.str(b, i)
		if !ok {
			return evSyntaxAt(i, what)
		}
		key := b[i+1 : kEnd-1]
		i = evSkipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return evSyntaxAt(i, what)
		}
		i = evSkipWS(b, i+1)
		vEnd, err := evScanValue(b, i, what)
		if err != nil {
			return err
		}
		if err := set(string(key), b[i:vEnd]); err != nil {
			return err
		}
		i = evSkipWS(b, vEnd)
		if i >= len(b) {
			return evSyntaxAt(i, what)
		}
		if b[i] == '}' {
			return evTrailing(b, i+1, what)
		}
		if b[i] != ',' {
			return evSyntaxAt(i, what)
		}
		i = evSkipWS(b, i+1)
	}
	return evSyntaxAt(i, what)
}

// skipMember checks the value of a member that set does not decode: a
// string's span was only found by its quotes, so it is checked here (other
// values were checked by walkObject). A decoder whose set passes every
// member it skips to skipMember refuses everything json.Valid refuses.
func skipMember(what, key string, v []byte) error {
	if len(v) > 0 && v[0] == '"' && !validString(v) {
		return fmt.Errorf("%s: %s: invalid JSON string", what, key)
	}
	return nil
}

// validString reports whether v is exactly one valid JSON string literal.
func validString(v []byte) bool {
	var vd validator
	end, ok := vd.str(v, 0)
	return ok && end == len(v)
}

// setString decodes the string member key of a what payload as
// json.Unmarshal into a string does (null leaves it unchanged).
func setString(dst *string, what, key string, v []byte) error {
	if string(v) == "null" {
		return nil
	}
	s, err := decodeJSONString(v)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", what, key, err)
	}
	*dst = s
	return nil
}

// decodeJSONString decodes the JSON string literal v (quotes included) as
// json.Unmarshal into a string does.
func decodeJSONString(v []byte) (string, error) {
	if s, ok := unquote(v); ok {
		return s, nil
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}

// setTime decodes the RFC 3339 string member key of a what payload as
// time.Time's UnmarshalJSON does (null leaves it unchanged). A string with
// escapes goes to UnmarshalJSON itself, which does not unescape: unquote
// would accept more than encoding/json.
func setTime(t *time.Time, what, key string, v []byte) error {
	if string(v) == "null" {
		return nil
	}
	s, ok := evPlainString(v)
	if !ok {
		if err := json.Unmarshal(v, t); err != nil {
			return fmt.Errorf("%s: %s: %w", what, key, err)
		}
		return nil
	}
	parsed, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", what, key, err)
	}
	*t = parsed
	return nil
}

// unquote decodes the JSON string literal v (quotes included) when it is
// valid UTF-8 and has no \u escape of a UTF-16 surrogate (encoding/json's
// own escapes of <, >, & and U+2028/9 included); ok is false otherwise, and
// for anything json.Unmarshal would refuse, so the caller decodes it with
// encoding/json.
func unquote(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	in := v[1 : len(v)-1]
	if !utf8.Valid(in) {
		return "", false
	}
	out := make([]byte, 0, len(in))
	for len(in) > 0 {
		j := bytes.IndexByte(in, '\\')
		if j < 0 {
			j = len(in)
		}
		for _, c := range in[:j] {
			if c < 0x20 || c == '"' {
				return "", false
			}
		}
		out = append(out, in[:j]...)
		if j == len(in) {
			break
		}
		if j+1 == len(in) {
			return "", false
		}
		c := in[j+1]
		switch c {
		case '"', '\\', '/':
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'u':
			r, ok := hex4(in[j+2:])
			if !ok || utf16.IsSurrogate(r) {
				return "", false
			}
			out = utf8.AppendRune(out, r)
			in = in[j+6:]
			continue
		default:
			return "", false
		}
		out = append(out, c)
		in = in[j+2:]
	}
	if len(out) == 0 {
		return "", true
	}
	return unsafe.String(&out[0], len(out)), true // out is not kept
}

// hex4 reads the four hex digits at the start of b as a rune.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// evPlainString returns the content of a JSON string without escapes or
// control characters and valid UTF-8; ok is false otherwise (the caller
// decodes it with encoding/json).
func evPlainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	in := v[1 : len(v)-1]
	for _, c := range in {
		if c == '\\' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

func evSkipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func evTrailing(b []byte, i int, what string) error {
	if evSkipWS(b, i) != len(b) {
		return evSyntaxAt(i, what)
	}
	return nil
}

func evSyntaxAt(i int, what string) error {
	return fmt.Errorf("%s: malformed JSON at byte %d", what, i)
}

// evScanValue returns the index after the JSON value starting at b[i]; a
// container's or a scalar's span is checked with json.Valid.
func evScanValue(b []byte, i int, what string) (int, error) {
	end, ok := SkipJSONValue(b, i)
	if !ok {
		return 0, evSyntaxAt(end, what)
	}
	if b[i] != '"' && !json.Valid(b[i:end]) {
		return 0, evSyntaxAt(i, what)
	}
	return end, nil
}

// setInt decodes the integer member key of a what payload as json.Unmarshal
// into an int does (null leaves it unchanged; a fraction or an exponent is
// refused, as there).
func setInt(dst *int, what, key string, v []byte) error {
	if string(v) == "null" {
		return nil
	}
	n, err := strconv.ParseInt(string(v), 10, 0)
	if err != nil {
		if err := json.Unmarshal(v, dst); err != nil {
			return fmt.Errorf("%s: %s: %w", what, key, err)
		}
		return nil
	}
	*dst = int(n)
	return nil
}
