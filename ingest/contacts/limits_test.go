package contacts_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

// TestNoInventedContactLimits: the spec (2.1) shows no length for any
// contact text field, so a 2,000-character first name, long country,
// language and source values and a 100,000-character custom field string
// are accepted, stored, read back and published in full (they were refused
// over 255, 100 and 10,000 characters); on subscribe and on an update too.
// What bounds them is the body cap of spec 8.2 (413) and what a contact
// event can carry (400 naming the field, nothing stored).
func TestNoInventedContactLimits(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	e.field(t, ws, "bio", "string")
	l := e.list(t, ws, "Long", false)
	first := strings.Repeat("Ä<b>", 500) // 2,000 characters, 2,500 bytes
	country := strings.Repeat("c", 1000)
	lang := strings.Repeat("de-", 200)
	source := strings.Repeat("s&", 300)
	bio := strings.Repeat("é <&> ", 20_000) // 120,000 characters
	var r upsertResp
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{
		"email": "long@example.com", "firstName": first, "country": country, "language": lang,
		"source": source, "customFields": map[string]any{"bio": bio},
	}, &r)
	want := contacts.Contact{FirstName: &first, Country: &country, Language: &lang, Source: &source}
	check := func(what string, c contacts.Contact) {
		t.Helper()
		for _, f := range []struct {
			name      string
			got, want *string
		}{{"firstName", c.FirstName, want.FirstName}, {"country", c.Country, want.Country},
			{"language", c.Language, want.Language}, {"source", c.Source, want.Source}} {
			if f.got == nil || *f.got != *f.want {
				t.Errorf("%s: %s is not what was sent (%d bytes of %d)", what, f.name, len(deref(f.got)), len(*f.want))
			}
		}
		var cf struct{ Bio string }
		if err := json.Unmarshal(c.CustomFields, &cf); err != nil || cf.Bio != bio {
			t.Errorf("%s: customFields.bio is not what was sent (%d bytes of %d, %v)", what, len(cf.Bio), len(bio), err)
		}
	}
	check("answer", r.Contact)
	var found contacts.Contact
	e.mustCall(t, 200, "GET", "/api/v1/contacts/search?email=long@example.com", key, nil, &found)
	check("search", found)
	published := 0
	for _, env := range ofType(e.topicEvents(t, schemas.TopicContacts, ws), schemas.TypeContactCreated) {
		var p schemas.ContactPayload
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.ContactID == r.ID {
			published++
			check("contact.created.v1", contacts.Contact{FirstName: p.FirstName, Country: p.Country,
				Language: p.Language, Source: p.Source, CustomFields: p.CustomFields})
		}
	}
	if published != 1 {
		t.Errorf("%d contact.created.v1 envelopes, want 1", published)
	}

	// An update and a subscribe that creates a contact take long values too.
	longer := strings.Repeat("ß", 5000)
	e.mustCall(t, 200, "POST", "/api/v1/contacts", key, map[string]any{"email": "long@example.com", "firstName": longer}, &r)
	if r.Contact.FirstName == nil || *r.Contact.FirstName != longer {
		t.Errorf("update: firstName of %d bytes, want %d", len(deref(r.Contact.FirstName)), len(longer))
	}
	var sub struct {
		ContactID string `json:"contactId"`
		Created   bool   `json:"created"`
	}
	e.mustCall(t, 200, "POST", "/api/v1/lists/"+l.ID+"/subscribe", key,
		map[string]any{"email": "sub@example.com", "firstName": first, "source": source}, &sub)
	e.mustCall(t, 200, "GET", "/api/v1/contacts/search?email=sub@example.com", key, nil, &found)
	if !sub.Created || deref(found.FirstName) != first || deref(found.Source) != source {
		t.Errorf("subscribe: created %v, firstName %d bytes, source %d bytes", sub.Created, len(deref(found.FirstName)), len(deref(found.Source)))
	}
	// The hosted sign-up form (JSON) as well.
	if st, body := e.raw(t, "POST", "/forms/"+l.ID, "", "application/json",
		`{"email":"form@example.com","firstName":"`+strings.Repeat("f", 2000)+`"}`, nil); st != 200 && st != 201 {
		t.Errorf("form with a 2,000-character first name: %d %.200s", st, body)
	}

	// Over the 16 MB body cap: 413, nothing stored.
	before := e.contactsOf(t, ws)
	huge := `{"email":"huge@example.com","firstName":"` + strings.Repeat("x", 16<<20) + `"}`
	st, body := e.raw(t, "POST", "/api/v1/contacts", key, "application/json", huge, nil)
	var eb errBody
	_ = json.Unmarshal(body, &eb)
	if st != 413 || eb.Code != "PAYLOAD_TOO_LARGE" {
		t.Errorf("a body over 16 MB: %d %.200s", st, body)
	}
	// Within the cap but too large for a contact event once encoded: 11 MB
	// of '<' is 66 MB as \u003c escapes. 400 naming the field, nothing stored.
	angle := `{"email":"angle@example.com","country":"` + strings.Repeat("<", 11<<20) + `"}`
	st, body = e.raw(t, "POST", "/api/v1/contacts", key, "application/json", angle, nil)
	eb = errBody{}
	_ = json.Unmarshal(body, &eb)
	if st != 400 || eb.Code != "validation_error" || !reflect.DeepEqual(eb.Fields, []string{"country"}) {
		t.Errorf("11 MB of '<': %d %.300s", st, body)
	}
	if n := e.contactsOf(t, ws); n != before {
		t.Errorf("%d contacts stored by the refused calls", n-before)
	}
}
