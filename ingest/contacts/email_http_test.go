package contacts_test

import (
	"net/url"
	"slices"
	"testing"

	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

// badAddresses are refused by the email rule wherever an address is taken.
var badAddresses = map[string]string{
	"bidi override":             "a\u202e@example.com",
	"bidi override in domain":   "a@exam\u202eple.com",
	"right-to-left mark":        "\u200fann@example.com",
	"isolate":                   "ann\u2066@example.com",
	"zero-width space":          "an\u200bn@example.com",
	"zero-width joiner":         "an\u200dn@example.com",
	"zero-width space (domain)": "ann@exa\u200bmple.com",
	"BOM":                       "\ufeffann@example.com",
	"word joiner":               "an\u2060n@example.com",
	"soft hyphen":               "an\u00adn@example.com",
	"fullwidth local part":      "ａｎｎ@example.com",
	"ligature local part":       "\ufb01@example.com",
	"not IDNA":                  "ann@xn--zz.com",
	"Bidi rule":                 "ann@\u05d0\u05d1a.com",
}

// TestEmailRuleRefusalsOverHTTP: an address with an invisible or bidi
// control character, a fullwidth or other compatibility form in the local
// part, or a domain IDNA refuses gets 400 validation_error with fields
// naming the field, on upsert, subscribe, unsubscribe, search and the
// hosted form, and nothing is stored or published.
func TestEmailRuleRefusalsOverHTTP(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	l := e.list(t, ws, "News", false)
	for name, addr := range badAddresses {
		for _, c := range []struct{ method, path string }{
			{"POST", "/api/v1/contacts"},
			{"POST", "/api/v1/lists/" + l.ID + "/subscribe"},
			{"POST", "/api/v1/lists/" + l.ID + "/unsubscribe"},
			{"GET", "/api/v1/contacts/search?email=" + url.QueryEscape(addr)},
		} {
			var body any
			if c.method == "POST" {
				body = map[string]any{"email": addr, "firstName": "Eve"}
			}
			var eb errBody
			if st := e.call(t, c.method, c.path, key, body, &eb); st != 400 || eb.Code != "validation_error" || !slices.Equal(eb.Fields, []string{"email"}) {
				t.Errorf("%s %s with %s %q: %d %+v, want 400 validation_error fields [email]", c.method, c.path, name, addr, st, eb)
			}
		}
		st, data := e.raw(t, "POST", "/forms/"+l.ID, "", "application/x-www-form-urlencoded", url.Values{"email": {addr}}.Encode(), nil)
		if st != 400 {
			t.Errorf("hosted form with %s: %d %s", name, st, data)
		}
	}
	if n := e.contactsOf(t, ws); n != 0 {
		t.Fatalf("%d contacts stored from refused addresses", n)
	}
	if evs := e.events(t, ws); len(evs) != 0 {
		t.Fatalf("%d events published for refused addresses", len(evs))
	}
}

// TestIDNSpellingsAreOneContact: the Unicode, upper-case, decomposed,
// fullwidth and A-label spellings of an internationalised domain upsert
// one contact, stored and answered in the ASCII form, created once, and
// search and subscribe find it by any spelling. A non-ASCII local part is
// accepted, lower-cased and stored NFC.
func TestIDNSpellingsAreOneContact(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	var first upsertResp
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": "user@exämple.com"}, &first)
	if !first.Created || first.Contact.Email != "user@xn--exmple-cua.com" {
		t.Fatalf("first upsert: %+v", first)
	}
	for _, spelling := range []string{"user@xn--exmple-cua.com", "USER@EXÄMPLE.COM", "user@exa\u0308mple.com", "user@ｅｘäｍｐｌｅ.com", " User@XN--EXMPLE-CUA.com "} {
		var r upsertResp
		e.mustCall(t, 200, "POST", "/api/v1/contacts", key, map[string]any{"email": spelling, "firstName": "Uma"}, &r)
		if r.Created || r.ID != first.ID || r.Contact.Email != "user@xn--exmple-cua.com" {
			t.Errorf("upsert %q: %+v, want contact %s updated", spelling, r, first.ID)
		}
	}
	var found struct {
		ID    string `json:"id"`
		Email string `json:"email"`
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts/search?email="+url.QueryEscape("user@exämple.com"), key, nil, &found)
	if found.ID != first.ID {
		t.Errorf("search by the Unicode spelling: %+v", found)
	}
	l := e.list(t, ws, "News", false)
	var sub struct {
		ContactID string `json:"contactId"`
		Created   bool   `json:"created"`
	}
	e.mustCall(t, 200, "POST", "/api/v1/lists/"+l.ID+"/subscribe", key, map[string]any{"email": "USER@xn--exmple-cua.com"}, &sub)
	if sub.ContactID != first.ID || sub.Created {
		t.Errorf("subscribe by the A-label spelling: %+v", sub)
	}

	var u upsertResp
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": "Ju\u0308rgen@Example.com"}, &u)
	if u.Contact.Email != "jürgen@example.com" {
		t.Fatalf("non-ASCII local part stored as %q", u.Contact.Email)
	}
	var again upsertResp
	e.mustCall(t, 200, "POST", "/api/v1/contacts", key, map[string]any{"email": "JÜRGEN@example.com"}, &again)
	if again.ID != u.ID || again.Created {
		t.Errorf("the composed upper-case spelling is another contact: %+v", again)
	}

	if n := e.contactsOf(t, ws); n != 2 {
		t.Fatalf("%d contacts, want 2", n)
	}
	created := 0
	for _, env := range e.events(t, ws) {
		if env.Type == schemas.TypeContactCreated {
			created++
		}
	}
	if created != 2 {
		t.Errorf("%d contact.created events, want 2", created)
	}
}
