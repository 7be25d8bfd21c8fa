package events

import (
	"encoding/json"
	"errors"
	"unicode/utf8"

	"sendstream/schemas"
)

// A small scanner over JSON the server has already checked for syntax: it
// finds the members of an object and the elements of an array as raw byte
// spans without building values, which is what the hot path needs (each
// field is then checked for its own type). It still fails cleanly on
// malformed input instead of trusting the caller.

var errSyntax = errors.New("malformed JSON")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// trimSpace returns b without surrounding JSON whitespace.
func trimSpace(b []byte) []byte {
	i := skipSpace(b, 0)
	j := len(b)
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	end, ok := schemas.SkipJSONString(b, i)
	if !ok {
		return 0, errSyntax
	}
	return end, nil
}

// skipValue returns the index after the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	end, ok := schemas.SkipJSONValue(b, i)
	if !ok {
		return 0, errSyntax
	}
	return end, nil
}

// eachMember calls fn for every member of the JSON object b (raw key
// without quotes, raw value). It returns errNotObject when b is not an
// object.
func eachMember(b []byte, fn func(key, val []byte)) error {
	b = trimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errNotObject
	}
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		if b[i] != '"' {
			return errSyntax
		}
		end, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return errSyntax
		}
		i = skipSpace(b, i+1)
		vend, err := skipValue(b, i)
		if err != nil {
			return err
		}
		fn(key, b[i:vend])
		i = skipSpace(b, vend)
		if i >= len(b) {
			return errSyntax
		}
		if b[i] == '}' {
			return nil
		}
		if b[i] != ',' {
			return errSyntax
		}
		i = skipSpace(b, i+1)
	}
	return errSyntax
}

var (
	errNotObject = errors.New("not a JSON object")
	errNotArray  = errors.New("not a JSON array")
)

// eachElement calls fn for every element of the JSON array b.
func eachElement(b []byte, fn func(i int, val []byte)) error {
	b = trimSpace(b)
	if len(b) == 0 || b[0] != '[' {
		return errNotArray
	}
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for n := 0; i < len(b); n++ {
		end, err := skipValue(b, i)
		if err != nil {
			return err
		}
		fn(n, b[i:end])
		i = skipSpace(b, end)
		if i >= len(b) {
			return errSyntax
		}
		if b[i] == ']' {
			return nil
		}
		if b[i] != ',' {
			return errSyntax
		}
		i = skipSpace(b, i+1)
	}
	return errSyntax
}

// keyIs reports whether the raw key (as found in the document, without
// quotes) is name. Keys with escapes are decoded first.
func keyIs(raw []byte, name string) bool {
	for _, c := range raw {
		if c == '\\' {
			s, ok := decodeString(append(append([]byte{'"'}, raw...), '"'))
			return ok && s == name
		}
	}
	return string(raw) == name
}

// decodeString decodes a raw JSON string value. ok is false when raw is not
// a string.
func decodeString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	plain := true
	for _, c := range inner {
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// isNull reports whether raw is the JSON literal null.
func isNull(raw []byte) bool { return string(raw) == "null" }
