package contacts

import (
	"strconv"

	"sendstream/schemas"
)

// Limits of Postgres numeric, which jsonb stores every JSON number as
// (numeric_in): digits before the decimal point, digits after it (the
// display scale, trailing zeros included), and the exponent it reads.
const (
	pgMaxIntDigits = 131072
	pgMaxScale     = 16383
	pgMaxExponent  = 1<<30 - 2 // INT_MAX/2 - 1
)

// jsonbSize returns an upper bound of the length of the text Postgres
// gives back for raw, valid JSON (the server checked it), stored as jsonb,
// and of that text once an envelope carries it: a space after every ':' and
// ',', numbers written out in plain digits (1e400 comes back as 401
// characters), and in strings each raw <, > and & counted as the six bytes
// of its \u escape and U+2028 and U+2029 as six (encoding/json writes them
// so; an escape that was sent keeps its length or shrinks); duplicate keys
// only shrink. With ok false, bad is the first number jsonb cannot store
// (more than 131072 digits before the decimal point or 16383 after it):
// writing it would fail the whole statement, so it is refused first.
func jsonbSize(raw []byte) (n int64, bad string, ok bool) {
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '"':
			end, _ := schemas.SkipJSONString(raw, i)
			n += int64(end-i) + escapeGrowth(raw[i:end])
			i = end
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(raw) && isNumberByte(raw[j]) {
				j++
			}
			l, fits := numericTextLen(raw[i:j])
			if !fits {
				return 0, string(raw[i:j]), false
			}
			n += l
			i = j
		case c == ':' || c == ',':
			n += 2
			i++
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		default: // brackets and the letters of true, false, null
			n++
			i++
		}
	}
	return n, "", true
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// numericTextLen returns the length of numeric_out of the JSON number num
// (valid JSON syntax), or false when numeric_in would refuse it.
func numericTextLen(num []byte) (int64, bool) {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	mant, exp := num, int64(0)
	for i, c := range num {
		if c == 'e' || c == 'E' {
			mant = num[:i]
			e, err := strconv.ParseInt(string(num[i+1:]), 10, 64)
			if err != nil || e > pgMaxExponent || e < -pgMaxExponent {
				return 0, false
			}
			exp = e
			break
		}
	}
	intPart, frac := mant, []byte(nil)
	for i, c := range mant {
		if c == '.' {
			intPart, frac = mant[:i], mant[i+1:]
			break
		}
	}
	scale := max(int64(len(frac))-exp, 0)
	// Digits before the decimal point: from the first significant digit of
	// intPart+frac to the point, which exp moves.
	lead, zero := int64(0), true
	for _, part := range [][]byte{intPart, frac} {
		for _, c := range part {
			if c != '0' {
				zero = false
				break
			}
			lead++
		}
		if !zero {
			break
		}
	}
	intDigits := int64(0)
	if !zero {
		intDigits = max(int64(len(intPart))+exp-lead, 0)
	}
	if intDigits > pgMaxIntDigits || scale > pgMaxScale {
		return 0, false
	}
	n := max(intDigits, 1)
	if scale > 0 {
		n += 1 + scale
	}
	if neg && !zero {
		n++
	}
	return n, true
}
