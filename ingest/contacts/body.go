package contacts

// Reading request bodies: one JSON object, optional strings and objects,
// metadata, the email field, and the 400 that names every failing field.

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"sendstream/ingest"
	"sendstream/schemas"
)

// object decodes a request body that must be one JSON object.
func object(body []byte) (map[string]json.RawMessage, *ingest.Result) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		r := ingest.Fail(400, codeValidation, "Request body is empty; send a JSON object")
		return nil, &r
	}
	m, ok := schemas.JSONMembers(body)
	if !ok {
		r := ingest.Fail(400, codeValidation, "Request body must be a JSON object")
		return nil, &r
	}
	return m, nil
}

// fieldErrs collects failing fields and their messages.
type fieldErrs struct {
	fields []string
	msgs   []string
}

func (e *fieldErrs) add(field, msg string) {
	e.fields = append(e.fields, field)
	e.msgs = append(e.msgs, field+" "+msg)
}

func (e *fieldErrs) result() ingest.Result {
	return ingest.Fail(400, codeValidation, "Invalid input: "+strings.Join(e.msgs, "; "), e.fields...)
}

// isNull reports whether a field is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return raw == nil || string(bytes.TrimSpace(raw)) == "null"
}

// optString reads an optional string field; nil when absent or null.
func optString(m map[string]json.RawMessage, name string, errs *fieldErrs) *string {
	raw, ok := m[name]
	if !ok || isNull(raw) {
		return nil
	}
	s, ok := schemas.JSONString(raw)
	if !ok {
		errs.add(name, "must be a string")
		return nil
	}
	return &s
}

// optObject reads an optional JSON object field; nil when absent or null.
func optObject(m map[string]json.RawMessage, name string, errs *fieldErrs) json.RawMessage {
	raw, ok := m[name]
	if !ok || isNull(raw) {
		return nil
	}
	raw = bytes.TrimSpace(raw)
	if raw[0] != '{' {
		errs.add(name, "must be an object")
		return nil
	}
	return raw
}

// checkMetadata refuses, before anything is written, metadata holding a
// number Postgres cannot store.
func checkMetadata(meta json.RawMessage, errs *fieldErrs) bool {
	if _, bad, ok := jsonbSize(meta); !ok {
		if len(bad) > 40 {
			bad = bad[:37] + "..."
		}
		errs.add("metadata", "holds the number "+bad+", which cannot be stored: numbers may have at most "+
			strconv.Itoa(pgMaxIntDigits)+" digits before the decimal point and "+strconv.Itoa(pgMaxScale)+" after it")
		return false
	}
	return true
}

// email reads a required email field, normalized.
func email(m map[string]json.RawMessage, name string, errs *fieldErrs) string {
	raw, ok := m[name]
	if !ok || isNull(raw) {
		errs.add(name, "is required")
		return ""
	}
	s, ok := schemas.JSONString(raw)
	if !ok {
		errs.add(name, "must be a string")
		return ""
	}
	e, err := NormalizeEmail(s)
	if err != nil {
		errs.add(name, err.Error())
		return ""
	}
	return e
}
