package schemas

import "fmt"

// AppendContactPayload appends p encoded exactly as json.Marshal(p)
// encodes it, without reflection: every contact upsert publishes one.
func AppendContactPayload(b []byte, p *ContactPayload) ([]byte, error) {
	for _, t := range [...]struct {
		name string
		year int
	}{{"createdAt", p.CreatedAt.Year()}, {"updatedAt", p.UpdatedAt.Year()}} {
		if t.year < 0 || t.year > 9999 {
			return b, fmt.Errorf("encode contact payload: %s year %d outside 0-9999", t.name, t.year)
		}
	}
	b = appendMember(b, '{', "contactId", p.ContactID)
	b = appendMember(b, ',', "email", p.Email)
	b = appendNullable(b, "firstName", p.FirstName)
	b = appendNullable(b, "country", p.Country)
	b = appendNullable(b, "language", p.Language)
	b = appendMember(b, ',', "status", p.Status)
	b = appendNullable(b, "source", p.Source)
	var err error
	for _, f := range [...]struct {
		name string
		raw  []byte
	}{{"customFields", p.CustomFields}, {"metadata", p.Metadata}} {
		b = appendKey(b, ',', f.name)
		if f.raw == nil { // as RawMessage.MarshalJSON; an empty one is an error
			b = append(b, "null"...)
		} else if b, err = appendRawJSON(b, f.raw); err != nil {
			return b, fmt.Errorf("encode contact payload %s: %w", f.name, err)
		}
	}
	b = AppendJSONTime(append(b, `,"createdAt":`...), p.CreatedAt)
	b = AppendJSONTime(append(b, `,"updatedAt":`...), p.UpdatedAt)
	b = appendStrings(b, "updatedFields", p.UpdatedFields)
	return append(b, '}'), nil
}

// appendNullable appends ,"key":value, or ,"key":null when value is nil.
func appendNullable(b []byte, key string, value *string) []byte {
	if value == nil {
		return append(appendKey(b, ',', key), "null"...)
	}
	return appendMember(b, ',', key, *value)
}
