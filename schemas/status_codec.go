package schemas

import "fmt"

// AppendStatusPayload appends p encoded exactly as json.Marshal(p) encodes
// it, without reflection (one per delivered message).
func AppendStatusPayload(b []byte, p *StatusPayload) ([]byte, error) {
	if y := p.At.Year(); y < 0 || y > 9999 {
		return b, fmt.Errorf("encode status payload: at %v outside years 0-9999", p.At)
	}
	b = appendMember(b, '{', "messageId", p.MessageID)
	b = appendMember(b, ',', "status", p.Status)
	b = AppendJSONTime(append(b, `,"at":`...), p.At)
	b = appendMember(b, ',', "to", p.To)
	b = appendOptMember(b, "externalId", p.ExternalID)
	b = appendOptMember(b, "templateId", p.TemplateID)
	b = appendOptMember(b, "policyId", p.PolicyID)
	b = appendOptMember(b, "provider", p.Provider)
	b = appendOptMember(b, "detail", p.Detail)
	return append(b, '}'), nil
}

// DecodeStatusPayload decodes a transactional.status.v1 payload as
// json.Unmarshal does for the payloads AppendStatusPayload writes.
func DecodeStatusPayload(b []byte) (StatusPayload, error) {
	var p StatusPayload
	err := walkObject(b, "status payload", p.set)
	return p, err
}

// set assigns one member of a status payload.
func (p *StatusPayload) set(key string, v []byte) error {
	var dst *string
	switch key {
	case "messageId":
		dst = &p.MessageID
	case "status":
		dst = &p.Status
	case "at":
		return setTime(&p.At, "status payload", key, v)
	case "to":
		dst = &p.To
	case "externalId":
		dst = &p.ExternalID
	case "templateId":
		dst = &p.TemplateID
	case "policyId":
		dst = &p.PolicyID
	case "provider":
		dst = &p.Provider
	case "detail":
		dst = &p.Detail
	default: // not a member of StatusPayload
		return nil
	}
	return setString(dst, "status payload", key, v)
}

// AppendMessageEventData appends d encoded exactly as json.Marshal(d)
// encodes it.
func AppendMessageEventData(b []byte, d *MessageEventData) ([]byte, error) {
	if y := d.OccurredAt.Year(); y < 0 || y > 9999 {
		return b, fmt.Errorf("encode message event: occurredAt %v outside years 0-9999", d.OccurredAt)
	}
	b = appendMember(b, '{', "messageId", d.MessageID)
	b = appendMember(b, ',', "rfcMessageId", d.RFCMessageID)
	b = appendMember(b, ',', "email", d.Email)
	b = appendOptMember(b, "externalId", d.ExternalID)
	b = appendMember(b, ',', "provider", d.Provider)
	b = AppendJSONTime(append(b, `,"occurredAt":`...), d.OccurredAt)
	return append(b, '}'), nil
}

// set assigns one member of a policy reference.
func (r *PolicyRef) set(key string, v []byte) error {
	var dst *string
	switch key {
	case "id":
		dst = &r.ID
	case "key":
		dst = &r.Key
	case "kind":
		dst = &r.Kind
	case "provider":
		dst = &r.Provider
	default:
		return skipMember("policy", key, v)
	}
	return setString(dst, "policy", key, v)
}

// DecodePolicyRef decodes a send payload's policy member.
func DecodePolicyRef(b []byte) (PolicyRef, error) {
	var r PolicyRef
	if string(b) == "null" {
		return r, nil
	}
	err := walkObject(b, "policy", r.set)
	return r, err
}
