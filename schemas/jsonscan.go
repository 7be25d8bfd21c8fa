package schemas

import (
	"bytes"
	"encoding/json"
)

// SkipJSONString returns the index after the JSON string starting at
// b[i] == '"', or, with ok false, the index where the input ended inside
// it. Escapes are stepped over, not checked.
func SkipJSONString(b []byte, i int) (end int, ok bool) {
	// A quote ends the string unless an odd run of backslashes comes right
	// before it (a run starts fresh: what precedes it is no backslash, or
	// the opening quote). So the quotes are found with IndexByte, which
	// reads many bytes at a time, and only the bytes before each are read.
	for j := i + 1; j < len(b); {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			break
		}
		p := j + q
		k := p - 1
		for k > i && b[k] == '\\' {
			k--
		}
		if (p-1-k)%2 == 0 {
			return p + 1, true
		}
		j = p + 1
	}
	return skipStringBytewise(b, i)
}

// skipStringBytewise is SkipJSONString a byte at a time; it also gives
// where an unterminated string's scan ended.
func skipStringBytewise(b []byte, i int) (end int, ok bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			i++
		}
	}
	return i, false
}

// SkipJSONValue returns the index after the JSON value starting at b[i]
// (a string, an object or array by bracket depth, or a scalar up to the
// next delimiter), or, with ok false, the index where scanning failed. It
// finds spans without validating them: callers that need valid JSON check
// the span.
func SkipJSONValue(b []byte, i int) (end int, ok bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return SkipJSONString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, ok := SkipJSONString(b, i)
				if !ok {
					return end, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return i, false
	default: // number, true, false, null
		start := i
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' &&
			b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
			i++
		}
		return i, i > start
	}
}

// JSONValueEnd returns the index just after the valid JSON value that
// starts exactly at b[i], or ok false when there is none (nesting beyond
// the validator's bound included).
func JSONValueEnd(b []byte, i int) (end int, ok bool) {
	var v validator
	return v.value(b, i)
}

// StoredJSONValueEnd is JSONValueEnd for input read back from the broker
// or a store: long strings it found valid before are taken from memory
// (storedStrings). Not for a request's own body.
func StoredJSONValueEnd(b []byte, i int) (end int, ok bool) {
	v := validator{stored: true}
	return v.value(b, i)
}

// JSONMembers returns the members of the JSON object b as json.Unmarshal
// into a map[string]json.RawMessage gives them (keys unescaped, the last of
// duplicated keys wins, values copied out of b), or ok false when b is not
// one valid JSON object. It walks the object once after ValidJSON instead
// of running encoding/json's reflection.
func JSONMembers(b []byte) (m map[string]json.RawMessage, ok bool) {
	if !ValidJSON(b) {
		return nil, false
	}
	b = bytes.Clone(bytes.TrimSpace(b)) // values share this one copy
	if len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	m = make(map[string]json.RawMessage, 8)
	i := SkipJSONSpace(b, 1)
	for i < len(b) && b[i] == '"' {
		kEnd, _ := SkipJSONString(b, i)
		key, ok := JSONString(b[i:kEnd])
		if !ok {
			return nil, false
		}
		i = SkipJSONSpace(b, kEnd)
		i = SkipJSONSpace(b, i+1) // past ':'
		vEnd, _ := SkipJSONValue(b, i)
		m[key] = json.RawMessage(b[i:vEnd:vEnd])
		i = SkipJSONSpace(b, vEnd)
		if i < len(b) && b[i] == ',' {
			i = SkipJSONSpace(b, i+1)
		}
	}
	return m, true
}

// JSONString decodes the JSON string literal raw (quotes included) as
// json.Unmarshal into a string does; ok false when raw is not a string.
// Strings without escapes take plainString's copy-only path.
func JSONString(raw []byte) (string, bool) {
	if len(raw) > 0 {
		if s, end, ok := plainString(raw, 0); ok && end == len(raw) {
			return s, true
		}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// SkipJSONSpace returns the index of the first byte at or after i that is
// not JSON whitespace (or len(b)).
func SkipJSONSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}
