package messagelog

import (
	"errors"
	"fmt"
	"time"

	"github.com/buger/jsonparser"

	"sendstream/schemas"
)

// This file turns envelopes into message_status rows.

// Row is one message_status row.
type Row struct {
	EventID, Workspace, MessageID, Status string
	At                                    time.Time
	Recipient, ExternalID, TemplateID     string
	PolicyID, Provider, Detail            string
	Received                              time.Time
}

// sendFields are the parts of a send payload the log needs (decoding skips
// the bodies and attachments without allocating them).
type sendFields struct {
	To, ExternalID, TemplateID string
	Policy                     schemas.PolicyRef
}

// errSendFieldsRead stops the member scan of decodeSendFields.
var errSendFieldsRead = errors.New("send fields read")

// decodeSendFields reads the fields the log needs from a send payload and
// stops at the first Liquid source ("subject"): schemas.SendPayload puts
// the small fields first, so the bodies and attachments are never scanned.
func decodeSendFields(payload []byte) (sendFields, error) {
	var p sendFields
	err := jsonparser.ObjectEach(payload, func(k, v []byte, t jsonparser.ValueType, _ int) error {
		switch string(k) {
		case "to":
			return sendString(&p.To, "to", v, t)
		case "externalId":
			return sendString(&p.ExternalID, "externalId", v, t)
		case "templateId":
			return sendString(&p.TemplateID, "templateId", v, t)
		case "policy":
			if t != jsonparser.Object {
				return errors.New("policy is not an object")
			}
			pol, err := schemas.DecodePolicyRef(v)
			p.Policy = pol
			return err
		case "subject", "preheader", "html", "text", "data", "contact", "attachments":
			return errSendFieldsRead
		}
		return nil
	})
	if err != nil && !errors.Is(err, errSendFieldsRead) {
		return p, fmt.Errorf("send payload: %w", err)
	}
	return p, nil
}

// sendString unescapes the string member name of a send payload into dst
// (null leaves it empty).
func sendString(dst *string, name string, v []byte, t jsonparser.ValueType) error {
	switch t {
	case jsonparser.Null:
		return nil
	case jsonparser.String:
		s, err := jsonparser.ParseString(v)
		*dst = s
		return err
	}
	return fmt.Errorf("%s is not a string", name)
}

// Decode turns an envelope into its row; ok false for envelope types that
// are not status changes.
func Decode(env schemas.Envelope, now time.Time) (Row, bool, error) {
	r := Row{EventID: env.ID, Workspace: env.Workspace, Received: now.UTC()}
	switch env.Type {
	case schemas.TypeTransactionalSend:
		p, err := decodeSendFields(env.Payload)
		if err != nil {
			return r, false, fmt.Errorf("messagelog: envelope %s: %w", env.ID, err)
		}
		r.MessageID, r.Status, r.At = env.ID, schemas.MessageQueued, env.OccurredAt.UTC()
		r.Recipient, r.ExternalID, r.TemplateID, r.PolicyID, r.Provider = p.To, p.ExternalID, p.TemplateID, p.Policy.ID, p.Policy.Provider
	case schemas.TypeTransactionalStatus:
		p, err := schemas.DecodeStatusPayload(env.Payload)
		if err != nil {
			return r, false, fmt.Errorf("messagelog: envelope %s: %w", env.ID, err)
		}
		r.MessageID, r.Status, r.At = p.MessageID, p.Status, p.At.UTC()
		r.Recipient, r.ExternalID, r.TemplateID, r.PolicyID, r.Provider, r.Detail = p.To, p.ExternalID, p.TemplateID, p.PolicyID, p.Provider, p.Detail
	default:
		return r, false, nil
	}
	if r.At.Unix() < 1 || r.At.Unix() >= 1<<32 {
		return r, false, fmt.Errorf("messagelog: envelope %s: time %s out of range", env.ID, r.At)
	}
	return r, true, nil
}
