package schemas

import (
	"encoding/json"
	"fmt"
)

// DecodeSendPayload decodes a SendPayload for the delivery stage, which
// reads every send: one pass over the members without reflection, the
// Liquid sources unescaped directly and data copied as raw JSON; only the
// small nested members (from, cc, bcc, policy, contact, attachments) go
// through encoding/json. It gives json.Unmarshal's result for every payload
// an encoder of SendPayload writes; unlike json.Unmarshal it matches member
// names exactly. Unknown members are skipped; a member of the wrong type or
// malformed JSON is an error: it refuses whatever json.Valid refuses, so a
// consumer may hand it payloads whose envelope was decoded unchecked
// (pipeline.Spec.UncheckedPayload).
func DecodeSendPayload(b []byte) (SendPayload, error) {
	return DecodeSendPayloadCached(b, "", nil)
}

// DecodeSendPayloadCached is DecodeSendPayload with the long Liquid
// sources (html, text) of workspace ws kept in sources (nil: decoded every
// time): a payload that repeats a source, as most do, is neither unescaped
// nor copied again. It refuses what DecodeSendPayload refuses: a source is
// kept only once it decoded.
func DecodeSendPayloadCached(b []byte, ws string, sources *SourceCache) (SendPayload, error) {
	var p SendPayload
	err := walkObject(b, "send payload", func(key string, v []byte) error {
		var dst *string
		switch key {
		case "html":
			dst = &p.HTML
		case "text":
			dst = &p.Text
		}
		if dst == nil || v[0] != '"' {
			return p.set(key, v) // null, or a member of another kind
		}
		s, _, err := sources.Get(ws, v, decodeJSONString)
		if err != nil {
			return fmt.Errorf("send payload: %s: %w", key, err)
		}
		*dst = s
		return nil
	})
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
		if err := skipMember("send payload", key, v); err != nil {
			return err
		}
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
		r, err := DecodePolicyRef(v)
		if err != nil {
			return fmt.Errorf("send payload: %w", err)
		}
		p.Policy = r
		return nil
	case "templateVersion":
		return unmarshalMember(key, v, &p.TemplateVersion)
	case "contact":
		return unmarshalMember(key, v, &p.Contact)
	case "attachments":
		return unmarshalMember(key, v, &p.Attachments)
	default: // not a member of SendPayload
		return skipMember("send payload", key, v)
	}
	return setString(dst, "send payload", key, v)
}

func unmarshalMember(key string, v []byte, dst any) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("send payload: %s: %w", key, err)
	}
	return nil
}
