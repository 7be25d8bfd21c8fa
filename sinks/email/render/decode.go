package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unsafe"

	"github.com/buger/jsonparser"

	"sendstream/schemas"
)

// errDataEnd is checked JSON that ended inside a value.
var errDataEnd = errors.New("unexpected end of JSON")

// dataDecoder decodes checked JSON into maps, slices and scalars in one
// pass. (jsonparser's ObjectEach finds the end of every nested value before
// the caller walks into it, so data nested n levels deep was scanned n
// times.) Each value reports its depth: an object or array is one level
// more than its deepest member, a scalar 0.
type dataDecoder struct {
	b []byte
	i int
	// text holds the bytes of the strings decoded so far, which point into
	// it: one allocation instead of one per string. Bytes once written are
	// never changed, so a string stays valid even if append moves text.
	text []byte
}

// skipSpace steps over insignificant whitespace.
func (d *dataDecoder) skipSpace() { d.i = schemas.SkipJSONSpace(d.b, d.i) }

// expect steps over whitespace and then c, or fails.
func (d *dataDecoder) expect(c byte) error {
	d.skipSpace()
	if d.i >= len(d.b) {
		return errDataEnd
	}
	if d.b[d.i] != c {
		return fmt.Errorf("want %q at offset %d, found %q", c, d.i, d.b[d.i])
	}
	d.i++
	return nil
}

// value decodes the value at the cursor.
func (d *dataDecoder) value() (any, int, error) {
	d.skipSpace()
	if d.i >= len(d.b) {
		return nil, 0, errDataEnd
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		s, err := d.str()
		return s, 0, err
	case c == 't':
		return true, 0, d.literal("true")
	case c == 'f':
		return false, 0, d.literal("false")
	case c == 'n':
		return nil, 0, d.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		start := d.i
		for d.i < len(d.b) && isNumberByte(d.b[d.i]) {
			d.i++
		}
		return number(json.Number(d.b[start:d.i])), 0, nil
	}
	return nil, 0, fmt.Errorf("unexpected %q at offset %d", d.b[d.i], d.i)
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// literal steps over word (true, false or null).
func (d *dataDecoder) literal(word string) error {
	if !bytes.HasPrefix(d.b[d.i:], []byte(word)) {
		return fmt.Errorf("bad literal at offset %d", d.i)
	}
	d.i += len(word)
	return nil
}

// str decodes the string whose opening quote is at the cursor.
func (d *dataDecoder) str() (string, error) {
	end, ok := schemas.SkipJSONString(d.b, d.i)
	if !ok {
		return "", errDataEnd
	}
	raw := d.b[d.i+1 : end-1]
	d.i = end
	if bytes.IndexByte(raw, '\\') >= 0 {
		return jsonparser.ParseString(raw)
	}
	if len(raw) == 0 {
		return "", nil
	}
	if d.text == nil {
		d.text = make([]byte, 0, len(d.b)) // every string's bytes fit
	}
	start := len(d.text)
	d.text = append(d.text, raw...)
	return unsafe.String(&d.text[start], len(raw)), nil
}

// object decodes the object whose '{' is at the cursor.
func (d *dataDecoder) object() (map[string]any, int, error) {
	d.i++
	m := map[string]any{}
	d.skipSpace()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return m, 1, nil
	}
	depth := 0
	for {
		d.skipSpace()
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return nil, 0, fmt.Errorf("want a member name at offset %d", d.i)
		}
		key, err := d.str()
		if err != nil {
			return nil, 0, err
		}
		if err := d.expect(':'); err != nil {
			return nil, 0, err
		}
		v, vd, err := d.value()
		if err != nil {
			return nil, 0, err
		}
		m[key], depth = v, max(depth, vd) // a repeated name: the last wins
		if done, err := d.next('}'); done || err != nil {
			return m, depth + 1, err
		}
	}
}

// array decodes the array whose '[' is at the cursor (never nil).
func (d *dataDecoder) array() ([]any, int, error) {
	d.i++
	out := []any{}
	d.skipSpace()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return out, 1, nil
	}
	depth := 0
	for {
		v, vd, err := d.value()
		if err != nil {
			return nil, 0, err
		}
		out, depth = append(out, v), max(depth, vd)
		if done, err := d.next(']'); done || err != nil {
			return out, depth + 1, err
		}
	}
}

// next steps over the ',' before another member, or over closing (done).
func (d *dataDecoder) next(closing byte) (done bool, err error) {
	d.skipSpace()
	if d.i >= len(d.b) {
		return false, errDataEnd
	}
	switch d.b[d.i] {
	case ',':
		d.i++
		return false, nil
	case closing:
		d.i++
		return true, nil
	}
	return false, fmt.Errorf("want ',' or %q at offset %d, found %q", closing, d.i, d.b[d.i])
}
