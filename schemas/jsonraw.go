package schemas

import "encoding/json"

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
