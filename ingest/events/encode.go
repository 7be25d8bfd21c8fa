package events

import (
	"time"
	"unicode/utf8"
)

// Hand-written encoders for the two things every accepted event writes: its
// envelope payload and its answer. They produce JSON that decodes to the
// same values as encoding/json's encoding of schemas.EventPayload and the
// answer types (see encode_test.go), without reflection on the hot path.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaping like encoding/json
// (including <, > and & and the line separators U+2028/U+2029); invalid
// UTF-8 becomes U+FFFD.
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

// appendTime appends t as a JSON string in RFC 3339 with nanoseconds, as
// time.Time's MarshalJSON does.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// payload is what appendPayload encodes: schemas.EventPayload's fields.
type payload struct {
	in         *Input
	contactID  string
	occurredAt time.Time
	receivedAt time.Time
	source     string
}

// appendPayload appends the JSON of a schemas.EventPayload.
func appendPayload(b []byte, p payload) []byte {
	in := p.in
	b = append(b, `{"event":`...)
	b = appendString(b, in.Event)
	if p.contactID != "" {
		b = append(b, `,"contactId":`...)
		b = appendString(b, p.contactID)
	}
	if in.Email != "" {
		b = append(b, `,"email":`...)
		b = appendString(b, in.Email)
	}
	if in.GoalType != "" {
		b = append(b, `,"goalType":`...)
		b = appendString(b, in.GoalType)
	}
	if in.Value != "" {
		b = append(b, `,"value":`...)
		b = appendString(b, in.Value)
	}
	if in.Currency != "" {
		b = append(b, `,"currency":`...)
		b = appendString(b, in.Currency)
	}
	if in.ExternalID != "" {
		b = append(b, `,"externalId":`...)
		b = appendString(b, in.ExternalID)
	}
	b = append(b, `,"occurredAt":`...)
	b = appendTime(b, p.occurredAt)
	b = append(b, `,"receivedAt":`...)
	b = appendTime(b, p.receivedAt)
	if len(in.Properties) > 0 {
		// As sent (valid JSON, checked by the server): the producer's
		// encoding of the envelope compacts the payload anyway.
		b = append(b, `,"properties":`...)
		b = append(b, in.Properties...)
	}
	b = append(b, `,"source":`...)
	b = appendString(b, p.source)
	return append(b, '}')
}

// appendOutcome appends the answer of POST /v1/events:
// {"id","contactId","deduplicated","status"}.
func appendOutcome(b []byte, id, contactID string, dup bool) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, id)
	b = append(b, `,"contactId":`...)
	if contactID == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, contactID)
	}
	if dup {
		b = append(b, `,"deduplicated":true,"status":"duplicate"}`...)
	} else {
		b = append(b, `,"deduplicated":false,"status":"recorded"}`...)
	}
	return b
}

// appendPublicOutcome appends the answer of POST /public/events:
// {"id","status"}.
func appendPublicOutcome(b []byte, id string, dup bool) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, id)
	if dup {
		return append(b, `,"status":"duplicate"}`...)
	}
	return append(b, `,"status":"recorded"}`...)
}
