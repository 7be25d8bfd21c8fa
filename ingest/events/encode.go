package events

import (
	"time"

	"sendstream/schemas"
)

// Hand-written encoders for the two things every accepted event writes: its
// envelope payload and its answer. They produce JSON that decodes to the
// same values as encoding/json's encoding of schemas.EventPayload and the
// answer types (see encode_test.go), without reflection on the hot path.

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
	b = schemas.AppendJSONString(b, in.Event)
	if p.contactID != "" {
		b = append(b, `,"contactId":`...)
		b = schemas.AppendJSONString(b, p.contactID)
	}
	if in.Email != "" {
		b = append(b, `,"email":`...)
		b = schemas.AppendJSONString(b, in.Email)
	}
	if in.GoalType != "" {
		b = append(b, `,"goalType":`...)
		b = schemas.AppendJSONString(b, in.GoalType)
	}
	if in.Value != "" {
		b = append(b, `,"value":`...)
		b = schemas.AppendJSONString(b, in.Value)
	}
	if in.Currency != "" {
		b = append(b, `,"currency":`...)
		b = schemas.AppendJSONString(b, in.Currency)
	}
	if in.ExternalID != "" {
		b = append(b, `,"externalId":`...)
		b = schemas.AppendJSONString(b, in.ExternalID)
	}
	b = append(b, `,"occurredAt":`...)
	b = schemas.AppendJSONTime(b, p.occurredAt)
	b = append(b, `,"receivedAt":`...)
	b = schemas.AppendJSONTime(b, p.receivedAt)
	if len(in.Properties) > 0 {
		// As sent (valid JSON, checked by the server): the producer's
		// encoding of the envelope compacts the payload anyway.
		b = append(b, `,"properties":`...)
		b = append(b, in.Properties...)
	}
	b = append(b, `,"source":`...)
	b = schemas.AppendJSONString(b, p.source)
	return append(b, '}')
}

// appendOutcome appends the answer of POST /v1/events:
// {"id","contactId","deduplicated","status"}.
func appendOutcome(b []byte, id, contactID string, dup bool) []byte {
	b = append(b, `{"id":`...)
	b = schemas.AppendJSONString(b, id)
	b = append(b, `,"contactId":`...)
	if contactID == "" {
		b = append(b, "null"...)
	} else {
		b = schemas.AppendJSONString(b, contactID)
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
	b = schemas.AppendJSONString(b, id)
	if dup {
		return append(b, `,"status":"duplicate"}`...)
	}
	return append(b, `,"status":"recorded"}`...)
}
