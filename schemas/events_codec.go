package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// DecodeEventPayload decodes an EventPayload, for the stages that read every
// event (analytics, goals): it walks the object once without reflection and
// copies the properties object as raw JSON. It gives json.Unmarshal's result
// for every payload an encoder of EventPayload writes; unlike json.Unmarshal
// it matches member names exactly. Unknown members are skipped; a member of
// the wrong type or malformed JSON is an error.
func DecodeEventPayload(b []byte) (EventPayload, error) {
	var p EventPayload
	err := walkObject(b, "event payload", p.set)
	return p, err
}

// walkObject calls set with the name as written (escapes are not decoded:
// names are matched exactly) and the raw value of each member of the JSON
// object b, in order, in one pass without reflection. A string's
// span is found by its quotes, a container's or scalar's is checked with
// json.Valid; malformed JSON, anything but one object, or set's first error
// ends the walk. what prefixes syntax errors.
func walkObject(b []byte, what string, set func(key string, v []byte) error) error {
	i := evSkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errors.New(what + ": not a JSON object")
	}
	i = evSkipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return evTrailing(b, i+1, what)
	}
	for i < len(b) {
		if b[i] != '"' {
			return evSyntaxAt(i, what)
		}
		kEnd, err := evScanString(b, i, what)
		if err != nil {
			return err
		}
		key := b[i+1 : kEnd-1]
		i = evSkipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return evSyntaxAt(i, what)
		}
		i = evSkipWS(b, i+1)
		vEnd, err := evScanValue(b, i, what)
		if err != nil {
			return err
		}
		if err := set(string(key), b[i:vEnd]); err != nil {
			return err
		}
		i = evSkipWS(b, vEnd)
		if i >= len(b) {
			return evSyntaxAt(i, what)
		}
		if b[i] == '}' {
			return evTrailing(b, i+1, what)
		}
		if b[i] != ',' {
			return evSyntaxAt(i, what)
		}
		i = evSkipWS(b, i+1)
	}
	return evSyntaxAt(i, what)
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
	default: // not a member of EventPayload
		return nil
	}
	if string(v) == "null" {
		return nil
	}
	if s, ok := evPlainString(v); ok {
		*dst = s
		return nil
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("event payload: %s: %w", key, err)
	}
	return nil
}

// evPlainString returns the content of a JSON string without escapes or
// control characters and valid UTF-8; ok is false otherwise (the caller
// decodes it with encoding/json).
func evPlainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	in := v[1 : len(v)-1]
	for _, c := range in {
		if c == '\\' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

func evSkipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func evTrailing(b []byte, i int, what string) error {
	if evSkipWS(b, i) != len(b) {
		return evSyntaxAt(i, what)
	}
	return nil
}

func evSyntaxAt(i int, what string) error {
	return fmt.Errorf("%s: malformed JSON at byte %d", what, i)
}

// evScanString returns the index after the string starting at b[i] == '"'.
func evScanString(b []byte, i int, what string) (int, error) {
	end, ok := SkipJSONString(b, i)
	if !ok {
		return 0, evSyntaxAt(end, what)
	}
	return end, nil
}

// evScanValue returns the index after the JSON value starting at b[i]; a
// container's or a scalar's span is checked with json.Valid.
func evScanValue(b []byte, i int, what string) (int, error) {
	end, ok := SkipJSONValue(b, i)
	if !ok {
		return 0, evSyntaxAt(end, what)
	}
	if b[i] != '"' && !json.Valid(b[i:end]) {
		return 0, evSyntaxAt(i, what)
	}
	return end, nil
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
