package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// DecodeSendPayload decodes a SendPayload for the delivery stage, which
// reads every send: one pass over the members without reflection, the
// Liquid sources unescaped directly and data copied as raw JSON; only the
// small nested members (from, cc, bcc, policy, contact, attachments) go
// through encoding/json. It gives json.Unmarshal's result for every payload
// an encoder of SendPayload writes; unlike json.Unmarshal it matches member
// names exactly. Unknown members are skipped; a member of the wrong type or
// malformed JSON is an error.
func DecodeSendPayload(b []byte) (SendPayload, error) {
	var p SendPayload
	err := walkObject(b, "send payload", p.set)
	return p, err
}

// set assigns one member of a send payload.
func (p *SendPayload) set(key string, v []byte) error {
	var dst *string
	switch key {
	case "messageId":
		dst = &p.MessageID
	case "rfcMessageId":
		dst = &p.RFCMessageID
	case "externalId":
		dst = &p.ExternalID
	case "workspaceName":
		dst = &p.WorkspaceName
	case "to":
		dst = &p.To
	case "replyTo":
		dst = &p.ReplyTo
	case "templateId":
		dst = &p.TemplateID
	case "language":
		dst = &p.Language
	case "subject":
		dst = &p.Subject
	case "preheader":
		dst = &p.Preheader
	case "html":
		dst = &p.HTML
	case "text":
		dst = &p.Text
	case "data":
		p.Data = append(json.RawMessage(nil), v...) // as RawMessage.UnmarshalJSON
		return nil
	case "acceptedAt":
		return setTime(&p.AcceptedAt, "send payload", key, v)
	case "spilled":
		return unmarshalMember(key, v, &p.Spilled)
	case "from":
		return unmarshalMember(key, v, &p.From)
	case "cc":
		return unmarshalMember(key, v, &p.Cc)
	case "bcc":
		return unmarshalMember(key, v, &p.Bcc)
	case "policy":
		return unmarshalMember(key, v, &p.Policy)
	case "templateVersion":
		return unmarshalMember(key, v, &p.TemplateVersion)
	case "contact":
		return unmarshalMember(key, v, &p.Contact)
	case "attachments":
		return unmarshalMember(key, v, &p.Attachments)
	default: // not a member of SendPayload
		return nil
	}
	if string(v) == "null" {
		return nil
	}
	if s, ok := unquote(v); ok {
		*dst = s
		return nil
	}
	return unmarshalMember(key, v, dst)
}

func unmarshalMember(key string, v []byte, dst any) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("send payload: %s: %w", key, err)
	}
	return nil
}

// setTime decodes the RFC 3339 string member key of a what payload as
// time.Time's UnmarshalJSON does (null leaves it unchanged).
func setTime(t *time.Time, what, key string, v []byte) error {
	if string(v) == "null" {
		return nil
	}
	s, ok := evPlainString(v)
	if !ok {
		if err := json.Unmarshal(v, t); err != nil {
			return fmt.Errorf("%s: %s: %w", what, key, err)
		}
		return nil
	}
	parsed, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", what, key, err)
	}
	*t = parsed
	return nil
}

// unquote decodes the JSON string literal v (quotes included) when it is
// valid UTF-8 and has no \u escape of a UTF-16 surrogate (encoding/json's
// own escapes of <, >, & and U+2028/9 included); ok is false otherwise, and
// for anything json.Unmarshal would refuse, so the caller decodes it with
// encoding/json.
func unquote(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	in := v[1 : len(v)-1]
	if !utf8.Valid(in) {
		return "", false
	}
	out := make([]byte, 0, len(in))
	for len(in) > 0 {
		j := bytes.IndexByte(in, '\\')
		if j < 0 {
			j = len(in)
		}
		for _, c := range in[:j] {
			if c < 0x20 || c == '"' {
				return "", false
			}
		}
		out = append(out, in[:j]...)
		if j == len(in) {
			break
		}
		if j+1 == len(in) {
			return "", false
		}
		c := in[j+1]
		switch c {
		case '"', '\\', '/':
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'u':
			r, ok := hex4(in[j+2:])
			if !ok || utf16.IsSurrogate(r) {
				return "", false
			}
			out = utf8.AppendRune(out, r)
			in = in[j+6:]
			continue
		default:
			return "", false
		}
		out = append(out, c)
		in = in[j+2:]
	}
	if len(out) == 0 {
		return "", true
	}
	return unsafe.String(&out[0], len(out)), true // out is not kept
}

// hex4 reads the four hex digits at the start of b as a rune.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
