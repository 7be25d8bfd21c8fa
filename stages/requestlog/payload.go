package requestlog

import (
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"

	"sendstream/schemas"
)

// decodePayload decodes a request.logged.v1 payload into a zero p with the
// result and error of json.Unmarshal. The stage decodes one per request the
// API answered, so the shape ingest writes (appendRequestLog: compact, known
// keys) is decoded by hand; anything else (unknown or differently cased
// keys, nulls, whitespace, surrogate escapes, invalid UTF-8, bad input) goes
// to encoding/json, which defines the result.
func decodePayload(data []byte, p *schemas.RequestLog) error {
	if fastPayload(data, p) {
		return nil
	}
	*p = schemas.RequestLog{}
	return json.Unmarshal(data, p)
}

// lexer reads the compact JSON subset the fast path accepts. Every method
// returns ok false on anything outside it.
type lexer struct {
	data []byte
	src  string // data as one string: unescaped values are substrings of it
	i    int
	buf  []byte // scratch for unescaping
}

func (l *lexer) peek(c byte) bool { return l.i < len(l.data) && l.data[l.i] == c }

// key reads `"name":` and returns name (valid until the next call).
func (l *lexer) key() ([]byte, bool) {
	d := l.data
	if !l.peek('"') {
		return nil, false
	}
	s := l.i + 1
	e := s
	for e < len(d) && d[e] != '"' && d[e] != '\\' && d[e] >= 0x20 {
		e++
	}
	if e+1 >= len(d) || d[e] != '"' || d[e+1] != ':' {
		return nil, false
	}
	l.i = e + 2
	return d[s:e], true
}

// str reads a string value, unescaping what encoding/json writes (short
// escapes and \u escapes outside the surrogate range).
func (l *lexer) str() (string, bool) {
	d := l.data
	if !l.peek('"') {
		return "", false
	}
	s := l.i + 1
	e := s
	ascii := true
	for e < len(d) {
		c := d[e]
		if c == '"' || c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		e++
	}
	if e >= len(d) || d[e] == '\\' {
		return l.escaped(s)
	}
	if d[e] != '"' || (!ascii && !utf8.Valid(d[s:e])) {
		return "", false
	}
	l.i = e + 1
	return l.src[s:e], true
}

// escaped decodes a string with escapes whose contents start at d[s].
func (l *lexer) escaped(s int) (string, bool) {
	d := l.data
	b := l.buf[:0]
	i := s
	for i < len(d) {
		run := i
		for i < len(d) && d[i] != '"' && d[i] != '\\' && d[i] >= 0x20 {
			i++
		}
		b = append(b, d[run:i]...)
		if i >= len(d) {
			break
		}
		c := d[i]
		switch {
		case c == '"':
			l.buf = b
			if !utf8.Valid(b) {
				return "", false
			}
			l.i = i + 1
			return string(b), true
		case c < 0x20:
			return "", false
		}
		if i+1 >= len(d) {
			return "", false
		}
		switch d[i+1] {
		case '"', '\\', '/':
			b = append(b, d[i+1])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			if i+5 >= len(d) {
				return "", false
			}
			r, ok := schemas.Hex4(d[i+2 : i+6])
			if !ok {
				return "", false
			}
			if r >= 0xD800 && r < 0xE000 { // surrogates: encoding/json's rules
				return "", false
			}
			b = utf8.AppendRune(b, r)
			i += 6
			continue
		default:
			return "", false
		}
		i += 2
	}
	return "", false
}

// body reads a schemas.Body: a string, or an object or array taken as its
// text.
func (l *lexer) body() (schemas.Body, bool) {
	if l.peek('{') || l.peek('[') {
		end, ok := schemas.StoredJSONValueEnd(l.data, l.i)
		if !ok {
			return "", false
		}
		s := l.src[l.i:end]
		l.i = end
		return schemas.Body(s), true
	}
	s, ok := l.str()
	return schemas.Body(s), ok
}

// integer reads a plain integer (no fraction, exponent or leading zero).
func (l *lexer) integer() (int64, bool) {
	d := l.data
	e := l.i
	if e < len(d) && d[e] == '-' {
		e++
	}
	ds := e
	for e < len(d) && d[e] >= '0' && d[e] <= '9' {
		e++
	}
	if e == ds || e-ds > 18 || (d[ds] == '0' && e-ds > 1) {
		return 0, false
	}
	v, err := strconv.ParseInt(string(d[l.i:e]), 10, 64)
	if err != nil {
		return 0, false
	}
	l.i = e
	return v, true
}

// boolean reads true or false.
func (l *lexer) boolean() (bool, bool) {
	d := l.data[l.i:]
	switch {
	case len(d) >= 4 && string(d[:4]) == "true":
		l.i += 4
		return true, true
	case len(d) >= 5 && string(d[:5]) == "false":
		l.i += 5
		return false, true
	}
	return false, false
}

// strings reads an array of strings; [] gives an empty, non-nil slice as
// encoding/json does.
func (l *lexer) strings() ([]string, bool) {
	if !l.peek('[') {
		return nil, false
	}
	l.i++
	out := []string{}
	if l.peek(']') {
		l.i++
		return out, true
	}
	for {
		s, ok := l.str()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		switch {
		case l.peek(','):
			l.i++
		case l.peek(']'):
			l.i++
			return out, true
		default:
			return nil, false
		}
	}
}

// object calls field for each key of an object; it ends after the '}'.
func (l *lexer) object(field func(key []byte) bool) bool {
	if !l.peek('{') {
		return false
	}
	l.i++
	if l.peek('}') {
		l.i++
		return true
	}
	for {
		k, ok := l.key()
		if !ok || !field(k) {
			return false
		}
		switch {
		case l.peek(','):
			l.i++
		case l.peek('}'):
			l.i++
			return true
		default:
			return false
		}
	}
}

// scratchPool holds the lexers' unescaping buffers: decoded strings are
// copied out of them, and a fresh buffer per payload grew by doubling on
// every escaped body.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// fastPayload decodes the compact shape into p; false means "use
// encoding/json" (p may be partly written).
func fastPayload(data []byte, p *schemas.RequestLog) bool {
	bp := scratchPool.Get().(*[]byte)
	// One copy of the payload backs every plain string of the row, instead
	// of an allocation per field.
	l := lexer{data: data, src: string(data), buf: (*bp)[:0]}
	defer func() {
		*bp = l.buf[:0]
		scratchPool.Put(bp)
	}()
	var ok bool
	top := func(k []byte) bool {
		switch string(k) {
		case "at":
			d := l.data
			if !l.peek('"') {
				return false
			}
			e := l.i + 1
			for e < len(d) && d[e] != '"' && d[e] != '\\' && d[e] >= 0x20 {
				e++
			}
			if e >= len(d) || d[e] != '"' || p.At.UnmarshalJSON(d[l.i:e+1]) != nil {
				return false
			}
			l.i = e + 1
			return true
		case "method":
			p.Method, ok = l.str()
		case "path":
			p.Path, ok = l.str()
		case "status":
			var v int64
			v, ok = l.integer()
			p.Status = int(v)
		case "durationUs":
			p.DurationUS, ok = l.integer()
		case "keyId":
			p.KeyID, ok = l.str()
		case "keyKind":
			p.KeyKind, ok = l.str()
		case "appId":
			p.AppID, ok = l.str()
		case "memberId":
			p.MemberID, ok = l.str()
		case "requestBody":
			p.RequestBody, ok = l.body()
		case "responseBody":
			p.ResponseBody, ok = l.body()
		case "truncated":
			p.Truncated, ok = l.boolean()
		case "ip":
			p.IP, ok = l.str()
		case "userAgent":
			p.UserAgent, ok = l.str()
		case "produced":
			pr := &p.Produced
			return l.object(func(k []byte) bool {
				var ok bool
				switch string(k) {
				case "messageIds":
					pr.MessageIDs, ok = l.strings()
				case "eventIds":
					pr.EventIDs, ok = l.strings()
				case "journeyRunIds":
					pr.JourneyRunIDs, ok = l.strings()
				case "contactIds":
					pr.ContactIDs, ok = l.strings()
				case "recipient":
					pr.Recipient, ok = l.str()
				case "externalId":
					pr.ExternalID, ok = l.str()
				}
				return ok
			})
		default:
			return false
		}
		return ok
	}
	return l.object(top) && l.i == len(data)
}
