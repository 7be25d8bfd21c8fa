package schemas

import (
	"bytes"
	"encoding/binary"
)

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
