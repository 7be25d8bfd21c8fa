package contacts

import (
	"strconv"

	"sendstream/schemas"
)

// appendContact appends c as JSON, byte for byte what encoding/json makes of
// Contact, without reflection: pages of
// 100 contacts are the hot read path. CustomFields and Metadata come from
// Postgres jsonb output, which is already valid, compact JSON.
func appendContact(dst []byte, c *Contact) []byte {
	dst = append(dst, `{"id":`...)
	dst = schemas.AppendJSONString(dst, c.ID)
	dst = append(dst, `,"email":`...)
	dst = schemas.AppendJSONString(dst, c.Email)
	dst = append(dst, `,"firstName":`...)
	dst = appendOptString(dst, c.FirstName)
	dst = append(dst, `,"country":`...)
	dst = appendOptString(dst, c.Country)
	dst = append(dst, `,"language":`...)
	dst = appendOptString(dst, c.Language)
	dst = append(dst, `,"status":`...)
	dst = schemas.AppendJSONString(dst, c.Status)
	dst = append(dst, `,"source":`...)
	dst = appendOptString(dst, c.Source)
	dst = append(dst, `,"customFields":`...)
	dst = append(dst, rawOrEmpty(c.CustomFields)...)
	dst = append(dst, `,"metadata":`...)
	dst = append(dst, rawOrNull(c.Metadata)...)
	dst = append(dst, `,"createdAt":`...)
	dst = schemas.AppendJSONTime(dst, c.CreatedAt)
	dst = append(dst, `,"updatedAt":`...)
	dst = schemas.AppendJSONTime(dst, c.UpdatedAt)
	return append(dst, '}')
}

// encodePage encodes the GET /v1/contacts answer.
func encodePage(p Page, pg pagination) []byte {
	dst := make([]byte, 0, 64+len(p.Contacts)*320)
	dst = append(dst, `{"contacts":[`...)
	for i := range p.Contacts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendContact(dst, &p.Contacts[i])
	}
	dst = append(dst, `],"pagination":{"page":`...)
	dst = strconv.AppendInt(dst, pg.Page, 10)
	dst = append(dst, `,"limit":`...)
	dst = strconv.AppendInt(dst, int64(pg.Limit), 10)
	dst = append(dst, `,"total":`...)
	dst = strconv.AppendInt(dst, pg.Total, 10)
	dst = append(dst, `,"totalPages":`...)
	dst = strconv.AppendInt(dst, pg.TotalPages, 10)
	return append(dst, "}}"...)
}

// encodeUpsert encodes the POST /v1/contacts answer.
func encodeUpsert(r UpsertResult) []byte {
	dst := make([]byte, 0, 400)
	dst = append(dst, `{"success":true,"created":`...)
	dst = strconv.AppendBool(dst, r.Created)
	dst = append(dst, `,"id":`...)
	dst = schemas.AppendJSONString(dst, r.Contact.ID)
	dst = append(dst, `,"contact":`...)
	dst = appendContact(dst, &r.Contact)
	return append(dst, '}')
}

func appendOptString(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return schemas.AppendJSONString(dst, *s)
}

const hexDigits = "0123456789abcdef"
