package schemas

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
)

// AppendSendPayload appends p encoded exactly as json.Marshal(p) encodes
// it, without reflection: a send's payload carries kilobytes of HTML, and
// it is encoded once per accepted send.
func AppendSendPayload(b []byte, p *SendPayload) ([]byte, error) {
	if y := p.AcceptedAt.Year(); y < 0 || y > 9999 {
		return b, fmt.Errorf("encode send payload: acceptedAt %v outside years 0-9999", p.AcceptedAt)
	}
	b = appendMember(b, '{', "messageId", p.MessageID)
	b = appendMember(b, ',', "rfcMessageId", p.RFCMessageID)
	if p.Spilled {
		b = append(b, `,"spilled":true`...)
	}
	b = appendOptMember(b, "externalId", p.ExternalID)
	b = appendOptMember(b, "workspaceName", p.WorkspaceName)
	b = append(b, `,"from":`...)
	b = appendMember(b, '{', "email", p.From.Email)
	b = appendOptMember(b, "name", p.From.Name)
	b = append(b, '}')
	b = appendMember(b, ',', "to", p.To)
	b = appendStrings(b, "cc", p.Cc)
	b = appendStrings(b, "bcc", p.Bcc)
	b = appendOptMember(b, "replyTo", p.ReplyTo)
	b = append(b, `,"policy":`...)
	b = appendMember(b, '{', "id", p.Policy.ID)
	b = appendMember(b, ',', "key", p.Policy.Key)
	b = appendMember(b, ',', "kind", p.Policy.Kind)
	b = appendMember(b, ',', "provider", p.Policy.Provider)
	b = append(b, '}')
	b = appendOptMember(b, "templateId", p.TemplateID)
	if p.TemplateVersion != 0 {
		b = strconv.AppendInt(append(b, `,"templateVersion":`...), p.TemplateVersion, 10)
	}
	b = appendOptMember(b, "language", p.Language)
	b = appendMember(b, ',', "subject", p.Subject)
	b = appendOptMember(b, "preheader", p.Preheader)
	if p.HTMLJSON != nil {
		b = append(appendKey(b, ',', "html"), p.HTMLJSON...)
	} else {
		b = appendMember(b, ',', "html", p.HTML)
	}
	b = appendOptMember(b, "text", p.Text)
	var err error
	if len(p.Data) > 0 {
		if p.DataCompact && !marshalEscapes(p.Data) {
			// Checked by the caller; nothing json.Marshal would change.
			b = append(append(b, `,"data":`...), p.Data...)
		} else if b, err = appendRawJSON(append(b, `,"data":`...), p.Data); err != nil {
			return b, fmt.Errorf("encode send payload data: %w", err)
		}
	}
	if p.Contact != nil {
		if b, err = appendRecipient(append(b, `,"contact":`...), p.Contact); err != nil {
			return b, err
		}
	}
	if len(p.Attachments) > 0 {
		b = append(b, `,"attachments":[`...)
		for i := range p.Attachments {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendAttachment(b, &p.Attachments[i])
		}
		b = append(b, ']')
	}
	b = AppendJSONTime(append(b, `,"acceptedAt":`...), p.AcceptedAt)
	return append(b, '}'), nil
}

// appendKey appends sep and "key":.
func appendKey(b []byte, sep byte, key string) []byte {
	b = append(b, sep, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// appendMember appends sep, the key and the string value.
func appendMember(b []byte, sep byte, key, value string) []byte {
	return AppendJSONString(appendKey(b, sep, key), value)
}

// appendOptMember appends ,"key":value unless value is empty (omitempty).
func appendOptMember(b []byte, key, value string) []byte {
	if value == "" {
		return b
	}
	return appendMember(b, ',', key, value)
}

// appendStrings appends ,"key":[...] unless list is empty (omitempty).
func appendStrings(b []byte, key string, list []string) []byte {
	if len(list) == 0 {
		return b
	}
	return AppendJSONStrings(appendKey(b, ',', key), list)
}

// AppendJSONStrings appends list as encoding/json encodes a []string: null
// when it is nil.
func AppendJSONStrings(b []byte, list []string) []byte {
	if list == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, s)
	}
	return append(b, ']')
}

func appendRecipient(b []byte, c *RecipientContact) ([]byte, error) {
	sep := byte('{')
	if c.ID != "" {
		b = appendMember(b, sep, "id", c.ID)
		sep = ','
	}
	b = appendMember(b, sep, "email", c.Email)
	b = appendOptMember(b, "firstName", c.FirstName)
	b = appendOptMember(b, "country", c.Country)
	b = appendOptMember(b, "language", c.Language)
	b = appendOptMember(b, "status", c.Status)
	if len(c.CustomFields) > 0 {
		v, err := json.Marshal(c.CustomFields)
		if err != nil {
			return b, fmt.Errorf("encode send payload contact: %w", err)
		}
		b = append(append(b, `,"customFields":`...), v...)
	}
	return append(b, '}'), nil
}

func appendAttachment(b []byte, a *Attachment) []byte {
	b = appendMember(b, '{', "filename", a.Filename)
	b = appendMember(b, ',', "contentType", a.ContentType)
	b = appendOptMember(b, "contentId", a.ContentID)
	b = append(b, `,"content":`...)
	if a.Content == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, a.Content)
		b = append(b, '"')
	}
	return append(b, '}')
}
