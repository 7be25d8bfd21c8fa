package transactional

import (
	"context"
	"strings"

	"sendstream/ingest/contacts"
	"sendstream/schemas"
	"sendstream/sinks/email/render"
)

// storedStatus is the recipient contact's status, "" when none.
func (p *prepared) storedStatus() string {
	if p.look.Contact == nil {
		return ""
	}
	return p.look.Contact.Status
}

// mergeContact builds p.contact from the stored contact and the request's
// contact object.
func (s *service) mergeContact(ctx context.Context, p *prepared) error {
	st, in := p.look.Contact, p.req.Contact
	if st == nil && in == nil {
		return nil
	}
	c := &schemas.RecipientContact{Email: p.req.To}
	if st != nil {
		c.ID, c.Status = st.ID, st.Status
		c.FirstName, c.Country, c.Language = deref(st.FirstName), deref(st.Country), deref(st.Language)
		c.CustomFields = st.CustomFields
	}
	if in != nil {
		if in.FirstName != nil {
			c.FirstName = *in.FirstName
		}
		if in.Country != nil {
			c.Country = *in.Country
		}
		if in.Language != nil {
			c.Language = *in.Language
		}
		if len(in.CustomFields) > 0 && s.contacts != nil {
			patch, bad, err := s.contacts.CustomFieldPatch(ctx, p.ws, in.CustomFields)
			if err != nil {
				return errInternal{err}
			}
			if len(bad) > 0 {
				fields := make([]string, len(bad))
				for i, k := range bad {
					fields[i] = "contact.customFields." + k
				}
				p.refusals = append(p.refusals, refusal{Status: 400, Code: codeValidation, Fields: fields,
					Error: "Invalid input: " + strings.Join(fields, ", ") + " has the wrong type for the custom field"})
			}
			p.custom = patch
			merged := map[string]any{}
			for k, v := range c.CustomFields {
				merged[k] = v
			}
			for k, v := range patch {
				if v == nil {
					delete(merged, k)
				} else {
					merged[k] = v
				}
			}
			c.CustomFields = merged
		}
		if st != nil && s.contacts != nil { // the update may not grow the contact past what its events carry
			f := contacts.Fields{FirstName: in.FirstName, Country: in.Country, Language: in.Language, CustomFields: p.custom}
			field, msg, err := s.contacts.CheckGrowth(ctx, p.ws, p.req.To, f)
			if err != nil {
				return errInternal{err}
			}
			if field != "" {
				p.refusals = append(p.refusals, refusal{Status: 400, Code: codeValidation, Fields: []string{"contact." + field},
					Error: "Invalid input: contact." + field + " " + msg})
			}
		}
	}
	p.contact = c
	return nil
}

func (p *prepared) renderContact() *render.Contact {
	if p.contact == nil {
		return nil
	}
	c := p.contact
	return &render.Contact{ID: c.ID, Email: c.Email, FirstName: c.FirstName, Country: c.Country, Language: c.Language, Status: c.Status}
}

func (p *prepared) customFields() map[string]any {
	if p.contact == nil {
		return nil
	}
	return p.contact.CustomFields
}
