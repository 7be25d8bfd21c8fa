package contacts

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// appendContact appends c as JSON, byte for byte what encoding/json makes of
// Contact (minus HTML escaping of <, > and &), without reflection: pages of
// 100 contacts are the hot read path. CustomFields and Metadata come from
// Postgres jsonb output, which is already valid, compact JSON.
func appendContact(dst []byte, c *Contact) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, c.ID)
	dst = append(dst, `,"email":`...)
	dst = appendString(dst, c.Email)
	dst = append(dst, `,"firstName":`...)
	dst = appendOptString(dst, c.FirstName)
	dst = append(dst, `,"country":`...)
	dst = appendOptString(dst, c.Country)
	dst = append(dst, `,"language":`...)
	dst = appendOptString(dst, c.Language)
	dst = append(dst, `,"status":`...)
	dst = appendString(dst, c.Status)
	dst = append(dst, `,"source":`...)
	dst = appendOptString(dst, c.Source)
	dst = append(dst, `,"customFields":`...)
	dst = append(dst, rawOrEmpty(c.CustomFields)...)
	dst = append(dst, `,"metadata":`...)
	dst = append(dst, rawOrNull(c.Metadata)...)
	dst = append(dst, `,"createdAt":`...)
	dst = appendTime(dst, c.CreatedAt)
	dst = append(dst, `,"updatedAt":`...)
	dst = appendTime(dst, c.UpdatedAt)
	return append(dst, '}')
}

// encodePage encodes the GET /v1/contacts answer.
func encodePage(p Page, pg pagination) []byte {
	dst := make([]byte, 0, 64+len(p.Contacts)*320)
	dst = append(dst, `{"contacts":[`...)
	for i := range p.Contacts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendContact(dst, &p.Contacts[i])
	}
	dst = append(dst, `],"pagination":{"page":`...)
	dst = strconv.AppendInt(dst, pg.Page, 10)
	dst = append(dst, `,"limit":`...)
	dst = strconv.AppendInt(dst, int64(pg.Limit), 10)
	dst = append(dst, `,"total":`...)
	dst = strconv.AppendInt(dst, pg.Total, 10)
	dst = append(dst, `,"totalPages":`...)
	dst = strconv.AppendInt(dst, pg.TotalPages, 10)
	return append(dst, "}}"...)
}

// encodeUpsert encodes the POST /v1/contacts answer.
func encodeUpsert(r UpsertResult) []byte {
	dst := make([]byte, 0, 400)
	dst = append(dst, `{"success":true,"created":`...)
	dst = strconv.AppendBool(dst, r.Created)
	dst = append(dst, `,"id":`...)
	dst = appendString(dst, r.Contact.ID)
	dst = append(dst, `,"contact":`...)
	dst = appendContact(dst, &r.Contact)
	return append(dst, '}')
}

func appendOptString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return appendString(dst, *s)
}

func appendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD, and U+2028/U+2029
// escaped as encoding/json does.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
