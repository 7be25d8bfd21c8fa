package schemas

import (
	"encoding/json"
	"time"
)

// DecodeEventPayload decodes an EventPayload, for the stages that read every
// event (analytics, goals): it walks the object once without reflection and
// copies the properties object as raw JSON. It gives json.Unmarshal's result
// for every payload an encoder of EventPayload writes; unlike json.Unmarshal
// it matches member names exactly. Unknown members are skipped; a member of
// the wrong type or malformed JSON is an error: it refuses everything
// json.Valid refuses.
func DecodeEventPayload(b []byte) (EventPayload, error) {
	var p EventPayload
	err := walkObject(b, "event payload", p.set)
	return p, err
}

// set assigns one member. Members are matched by their exact names (the
// ones EventPayload's encoders write); others are skipped.
func (p *EventPayload) set(key string, v []byte) error {
	var dst *string
	switch key {
	case "event":
		dst = &p.Event
	case "contactId":
		dst = &p.ContactID
	case "email":
		dst = &p.Email
	case "goalType":
		dst = &p.GoalType
	case "value":
		dst = &p.Value
	case "currency":
		dst = &p.Currency
	case "externalId":
		dst = &p.ExternalID
	case "source":
		dst = &p.Source
	case "occurredAt":
		return setTime(&p.OccurredAt, "event payload", key, v)
	case "receivedAt":
		return setTime(&p.ReceivedAt, "event payload", key, v)
	case "properties":
		if string(v) == "null" {
			p.Properties = nil
			return nil
		}
		p.Properties = append(json.RawMessage(nil), v...)
		return nil
	default: // not a member of EventPayload: checked, so that the walk
		// refuses whatever json.Valid refuses (a stage may then take the
		// envelope unchecked, pipeline.Spec.UncheckedPayload)
		return skipMember("event payload", key, v)
	}
	return setString(dst, "event payload", key, v)
}

// AppendEventRecordedData appends the JSON of d, as json.Marshal would
// write it (see the test), without reflection: the goals stage encodes one
// per matched event.
func AppendEventRecordedData(dst []byte, d *EventRecordedData) []byte {
	dst = append(dst, `{"eventId":`...)
	dst = AppendJSONString(dst, d.EventID)
	dst = append(dst, `,"event":`...)
	dst = AppendJSONString(dst, d.Event)
	dst = append(dst, `,"contactId":`...)
	dst = AppendJSONString(dst, d.ContactID)
	for _, f := range [...]struct {
		name, v string
	}{{`,"email":`, d.Email}, {`,"goalType":`, d.GoalType}} {
		if f.v != "" {
			dst = append(dst, f.name...)
			dst = AppendJSONString(dst, f.v)
		}
	}
	if d.Value != "" {
		dst = append(dst, `,"value":`...)
		dst = append(dst, d.Value...) // a JSON number as sent
	}
	for _, f := range [...]struct {
		name, v string
	}{{`,"currency":`, d.Currency}, {`,"externalId":`, d.ExternalID}} {
		if f.v != "" {
			dst = append(dst, f.name...)
			dst = AppendJSONString(dst, f.v)
		}
	}
	dst = append(dst, `,"occurredAt":"`...)
	dst = d.OccurredAt.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	if len(d.Properties) > 0 {
		dst = append(dst, `,"properties":`...)
		dst = append(dst, d.Properties...)
	}
	return append(dst, '}')
}
