package ingest

import (
	"strconv"
	"time"
	"unicode/utf8"

	"sendstream/schemas"
)

// appendRequestLog encodes rl exactly as encoding/json would (same field
// order, omitempty and escaping), without reflection: it runs for every
// logged call.
func appendRequestLog(b []byte, rl *schemas.RequestLog) []byte {
	b = append(b, `{"at":`...)
	b = append(b, '"')
	b = rl.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","method":`...)
	b = appendString(b, rl.Method)
	b = append(b, `,"path":`...)
	b = appendString(b, rl.Path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(rl.Status), 10)
	b = append(b, `,"durationUs":`...)
	b = strconv.AppendInt(b, rl.DurationUS, 10)
	b = append(b, `,"keyId":`...)
	b = appendString(b, rl.KeyID)
	b = append(b, `,"keyKind":`...)
	b = appendString(b, rl.KeyKind)
	if rl.RequestBody != "" {
		b = append(b, `,"requestBody":`...)
		b = appendString(b, rl.RequestBody)
	}
	if rl.ResponseBody != "" {
		b = append(b, `,"responseBody":`...)
		b = appendString(b, rl.ResponseBody)
	}
	if rl.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	b = append(b, `,"produced":{`...)
	p := &rl.Produced
	n := len(b)
	b = appendList(b, "messageIds", p.MessageIDs)
	b = appendList(b, "eventIds", p.EventIDs)
	b = appendList(b, "journeyRunIds", p.JourneyRunIDs)
	b = appendList(b, "contactIds", p.ContactIDs)
	if p.Recipient != "" {
		b = appendKey(b, "recipient")
		b = appendString(b, p.Recipient)
	}
	if p.ExternalID != "" {
		b = appendKey(b, "externalId")
		b = appendString(b, p.ExternalID)
	}
	if len(b) > n {
		b = append(b[:n], b[n+1:]...) // drop the first field's leading comma
	}
	b = append(b, '}')
	if rl.IP != "" {
		b = append(b, `,"ip":`...)
		b = appendString(b, rl.IP)
	}
	if rl.UserAgent != "" {
		b = append(b, `,"userAgent":`...)
		b = appendString(b, rl.UserAgent)
	}
	return append(b, '}')
}

func appendKey(b []byte, k string) []byte {
	b = append(b, ',', '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

func appendList(b []byte, k string, vs []string) []byte {
	if len(vs) == 0 {
		return b
	}
	b = appendKey(b, k)
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, v)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does:
// <, >, & and U+2028/U+2029 escaped, invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
