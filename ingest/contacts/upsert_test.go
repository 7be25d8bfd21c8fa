package contacts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

func TestUpsertCreatesThenUpdatesKeepingOmittedFields(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})

	var r1 upsertResp
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{
		"email": "  Ann.Lee@Example.COM ", "firstName": "Ann", "country": "DE",
		"source": "signup-page", "metadata": map[string]any{"campaign": "spring"},
	}, &r1)
	c := r1.Contact
	if !r1.Success || !r1.Created || r1.ID == "" || c.ID != r1.ID {
		t.Fatalf("create: %+v", r1)
	}
	if c.Email != "ann.lee@example.com" || deref(c.FirstName) != "Ann" || deref(c.Country) != "DE" || c.Language != nil ||
		c.Status != "ACTIVE" || deref(c.Source) != "signup-page" || string(c.CustomFields) != "{}" {
		t.Fatalf("created contact: %+v", c)
	}
	assertJSON(t, c.Metadata, `{"campaign":"spring"}`)

	// An update: omitted fields keep their values; source and metadata are
	// creation-only; the same address in another case is the same contact.
	var r2 upsertResp
	e.mustCall(t, 200, "POST", "/api/v1/contacts", key, map[string]any{
		"email": "ANN.LEE@example.com", "language": "de", "source": "import", "metadata": map[string]any{"other": 1},
	}, &r2)
	c2 := r2.Contact
	if r2.Created || c2.ID != c.ID || deref(c2.FirstName) != "Ann" || deref(c2.Country) != "DE" || deref(c2.Language) != "de" ||
		deref(c2.Source) != "signup-page" || !c2.UpdatedAt.After(c.UpdatedAt) || !c2.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("update: %+v", r2)
	}
	assertJSON(t, c2.Metadata, `{"campaign":"spring"}`)

	// The same update again changes nothing (updatedAt stays).
	var r3 upsertResp
	e.mustCall(t, 200, "POST", "/api/v1/contacts", key, map[string]any{"email": "ann.lee@example.com", "language": "de"}, &r3)
	if r3.Created || !r3.Contact.UpdatedAt.Equal(c2.UpdatedAt) {
		t.Fatalf("no-op update: %+v", r3)
	}

	// An empty string clears a text field; null keeps it.
	var r4 upsertResp
	e.mustCall(t, 200, "POST", "/api/v1/contacts", key, map[string]any{"email": "ann.lee@example.com", "country": "", "firstName": nil}, &r4)
	if deref(r4.Contact.Country) != "" || deref(r4.Contact.FirstName) != "Ann" {
		t.Fatalf("clear: %+v", r4.Contact)
	}

	// An upsert never changes the subscription status.
	if _, err := e.pool.Exec(context.Background(), "UPDATE contacts SET status = 'UNSUBSCRIBED' WHERE id = $1", c.ID); err != nil {
		t.Fatal(err)
	}
	var r5 upsertResp
	e.mustCall(t, 200, "POST", "/api/v1/contacts", key, map[string]any{"email": "ann.lee@example.com", "firstName": "Annie"}, &r5)
	if r5.Contact.Status != "UNSUBSCRIBED" || deref(r5.Contact.FirstName) != "Annie" {
		t.Fatalf("status after upsert: %+v", r5.Contact)
	}

	// Without a source the contact's source is "api".
	var r6 upsertResp
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": "bob@example.com"}, &r6)
	if deref(r6.Contact.Source) != "api" || string(r6.Contact.Metadata) != "null" {
		t.Fatalf("default source: %+v", r6.Contact)
	}
	if n := e.contactsOf(t, ws); n != 2 {
		t.Fatalf("contacts: %d, want 2", n)
	}

	// Events: one created per new contact, one updated per changing update
	// (r2, r4, r5), none for the no-op.
	evs := e.events(t, ws)
	created := ofType(evs, schemas.TypeContactCreated)
	updated := ofType(evs, schemas.TypeContactUpdated)
	if len(created) != 2 || len(updated) != 3 {
		t.Fatalf("events: %d created, %d updated, want 2 and 3: %v", len(created), len(updated), types(evs))
	}
	// Envelopes of one contact share a partition key, so they keep their order.
	created = ofKey(created, ws+":"+c.ID)
	if len(created) != 1 || created[0].ID != schemas.IDFromKey(ws, schemas.TypeContactCreated, c.ID) {
		t.Fatalf("created envelope key/id: %+v", created)
	}
	var p schemas.ContactPayload
	mustDecode(t, created[0].Payload, &p)
	if p.ContactID != c.ID || p.Email != "ann.lee@example.com" || deref(p.Source) != "signup-page" || p.Status != "ACTIVE" {
		t.Fatalf("created payload: %+v", p)
	}
	var u schemas.ContactPayload
	mustDecode(t, updated[0].Payload, &u)
	if !reflect.DeepEqual(u.UpdatedFields, []string{"language"}) || deref(u.Language) != "de" {
		t.Fatalf("updated payload: %+v", u)
	}
	mustDecode(t, updated[1].Payload, &u)
	if !reflect.DeepEqual(u.UpdatedFields, []string{"country"}) {
		t.Fatalf("second update fields: %v", u.UpdatedFields)
	}
}

func TestUpsertCustomFields(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	e.field(t, ws, "plan", "string")
	e.field(t, ws, "age", "number")
	e.field(t, ws, "vip", "boolean")
	e.field(t, ws, "birthday", "date")

	var r upsertResp
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": "cf@example.com", "customFields": map[string]any{
		"plan": "pro", "age": 42.5, "vip": true, "birthday": "1990-05-01", "unknownKey": "ignored",
	}}, &r)
	assertJSON(t, r.Contact.CustomFields, `{"plan":"pro","age":42.5,"vip":true,"birthday":"1990-05-01"}`)

	// Wrong types: 400 naming each field, nothing written.
	for _, tc := range []struct {
		body   map[string]any
		fields []string
	}{
		{map[string]any{"age": "42"}, []string{"customFields.age"}},
		{map[string]any{"vip": "yes", "birthday": "yesterday"}, []string{"customFields.birthday", "customFields.vip"}},
		{map[string]any{"plan": 7}, []string{"customFields.plan"}},
		{map[string]any{"birthday": 19900501}, []string{"customFields.birthday"}},
	} {
		for _, email := range []string{"cf@example.com", "new-cf@example.com"} {
			var eb errBody
			e.mustCall(t, 400, "POST", "/api/v1/contacts", key, map[string]any{"email": email, "customFields": tc.body}, &eb)
			if eb.Code != "validation_error" || !reflect.DeepEqual(eb.Fields, tc.fields) {
				t.Fatalf("%v: %+v, want fields %v", tc.body, eb, tc.fields)
			}
		}
	}
	if n := e.contactsOf(t, ws); n != 1 {
		t.Fatalf("contacts after refused upserts: %d", n)
	}

	// Given keys merge into the stored ones; null removes a value; a date-time
	// is stored in UTC.
	e.mustCall(t, 200, "POST", "/api/v1/contacts", key, map[string]any{"email": "cf@example.com", "customFields": map[string]any{
		"age": 43, "plan": nil, "birthday": "1990-05-01T10:00:00+02:00",
	}}, &r)
	assertJSON(t, r.Contact.CustomFields, `{"age":43,"vip":true,"birthday":"1990-05-01T08:00:00Z"}`)

	// A field defined after the first upsert is picked up.
	e.field(t, ws, "team", "string")
	e.mustCall(t, 200, "POST", "/api/v1/contacts", key, map[string]any{"email": "cf@example.com", "customFields": map[string]any{"team": "a"}}, &r)
	assertJSON(t, r.Contact.CustomFields, `{"age":43,"vip":true,"birthday":"1990-05-01T08:00:00Z","team":"a"}`)

	// Redefining a key with another type is refused.
	if err := e.store.CreateCustomField(context.Background(), ws, "age", "string"); err == nil {
		t.Fatal("redefining age as string succeeded")
	}
}

func TestUpsertBadInputWritesNothing(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{RateMultiplier: 10})
	for _, tc := range []struct {
		name   string
		body   string
		status int
		code   string
		fields []string
	}{
		{"empty body", "", 400, "validation_error", nil},
		{"not JSON", `{"email":`, 400, "invalid_json", nil},
		{"array", `[{"email":"a@example.com"}]`, 400, "validation_error", nil},
		{"string", `"a@example.com"`, 400, "validation_error", nil},
		{"no email", `{"firstName":"A"}`, 400, "validation_error", []string{"email"}},
		{"null email", `{"email":null}`, 400, "validation_error", []string{"email"}},
		{"malformed email", `{"email":"not-an-email"}`, 400, "validation_error", []string{"email"}},
		{"email without domain dot", `{"email":"a@localhost"}`, 400, "validation_error", []string{"email"}},
		{"email with name", `{"email":"Ann <ann@example.com>"}`, 400, "validation_error", []string{"email"}},
		{"email two ats", `{"email":"a@b@example.com"}`, 400, "validation_error", []string{"email"}},
		{"email number", `{"email":5}`, 400, "validation_error", []string{"email"}},
		{"firstName number", `{"email":"a@example.com","firstName":5}`, 400, "validation_error", []string{"firstName"}},
		{"country number", `{"email":"a@example.com","country":[]}`, 400, "validation_error", []string{"country"}},
		{"language object", `{"email":"a@example.com","language":{}}`, 400, "validation_error", []string{"language"}},
		{"metadata array", `{"email":"a@example.com","metadata":[1]}`, 400, "validation_error", []string{"metadata"}},
		{"customFields string", `{"email":"a@example.com","customFields":"x"}`, 400, "validation_error", []string{"customFields"}},
		{"source number", `{"email":"a@example.com","source":1}`, 400, "validation_error", []string{"source"}},
		{"several", `{"email":"nope","firstName":true,"metadata":"m"}`, 400, "validation_error", []string{"email", "firstName", "metadata"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, data := e.raw(t, "POST", "/api/v1/contacts", key, "application/json", tc.body, nil)
			var eb errBody
			_ = json.Unmarshal(data, &eb)
			if st != tc.status || eb.Code != tc.code || !reflect.DeepEqual(eb.Fields, tc.fields) || eb.Error == "" {
				t.Fatalf("status %d %s, want %d %s fields %v", st, data, tc.status, tc.code, tc.fields)
			}
		})
	}
	// Over 16 MB: 413, nothing processed.
	big := `{"email":"big@example.com","metadata":{"x":"` + strings.Repeat("a", 16<<20) + `"}}`
	st, data := e.raw(t, "POST", "/api/v1/contacts", key, "application/json", big, nil)
	if st != 413 || !strings.Contains(string(data), "PAYLOAD_TOO_LARGE") {
		t.Fatalf("16 MB body: %d %.200s", st, data)
	}
	// Wrong content type.
	st, _ = e.raw(t, "POST", "/api/v1/contacts", key, "text/csv", "email\na@example.com", nil)
	if st != 415 {
		t.Fatalf("text/csv: %d", st)
	}
	if n := e.contactsOf(t, ws); n != 0 {
		t.Fatalf("bad input wrote %d contacts", n)
	}
	if evs := e.events(t, ws); len(evs) != 0 {
		t.Fatalf("bad input published %v", types(evs))
	}
}

func TestConcurrentUpsertsOfOneNewEmailCreateItOnce(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{RateMultiplier: 10})
	// A second store on its own pool stands for a second ingest process:
	// its batcher is independent of the server's.
	other := contacts.NewStore(e.pool)
	t.Cleanup(other.Close)

	for round := 0; round < 3; round++ {
		email := fmt.Sprintf("race%d@example.com", round)
		var wg sync.WaitGroup
		var mu sync.Mutex
		created, updated := 0, 0
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				body := map[string]any{"email": email, "firstName": fmt.Sprintf("n%d", i)}
				var isNew bool
				if i%4 == 3 {
					r, err := other.Upsert(context.Background(), ws, contacts.UpsertInput{Email: email, Source: "api"})
					if err != nil {
						t.Error(err)
						return
					}
					isNew = r.Created
				} else {
					var r upsertResp
					st := e.call(t, "POST", "/api/v1/contacts", key, body, &r)
					if st != 200 && st != 201 || (st == 201) != r.Created {
						t.Errorf("status %d created %v", st, r.Created)
						return
					}
					isNew = r.Created
				}
				mu.Lock()
				if isNew {
					created++
				} else {
					updated++
				}
				mu.Unlock()
			}(i)
		}
		wg.Wait()
		if created != 1 || updated != 19 {
			t.Fatalf("round %d: %d created, %d updated; want exactly 1 and 19", round, created, updated)
		}
		if n := e.count(t, "SELECT count(*) FROM contacts WHERE workspace_id = $1 AND email = $2", ws, email); n != 1 {
			t.Fatalf("round %d: %d rows", round, n)
		}
	}
	// Never two CONTACT_CREATED for one email (creations through the second
	// store publish nothing: only handlers publish).
	seen := map[string]int{}
	for _, env := range ofType(e.events(t, ws), schemas.TypeContactCreated) {
		var p schemas.ContactPayload
		mustDecode(t, env.Payload, &p)
		if seen[p.Email]++; seen[p.Email] > 1 {
			t.Fatalf("two CONTACT_CREATED for %s", p.Email)
		}
	}
	if total := e.total(t, ws); total != 3 {
		t.Fatalf("contact total %d, want 3", total)
	}
}

func TestContactLimitHoldsAndUpdatesStillWork(t *testing.T) {
	e := start(t)
	limit := int64(3)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{ContactLimit: &limit, RateMultiplier: 10})
	for i := 0; i < 3; i++ {
		e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": fmt.Sprintf("c%d@example.com", i)}, nil)
	}
	var eb errBody
	e.mustCall(t, 403, "POST", "/api/v1/contacts", key, map[string]any{"email": "c3@example.com"}, &eb)
	if eb.Code != "contact_limit_reached" {
		t.Fatalf("over limit: %+v", eb)
	}
	var r upsertResp
	e.mustCall(t, 200, "POST", "/api/v1/contacts", key, map[string]any{"email": "c1@example.com", "firstName": "Still"}, &r)
	if deref(r.Contact.FirstName) != "Still" {
		t.Fatalf("update at limit: %+v", r)
	}
	// Subscribing a new email counts too; an existing one still works.
	l := e.list(t, ws, "Limited", false)
	e.mustCall(t, 403, "POST", "/api/v1/lists/"+l.ID+"/subscribe", key, map[string]any{"email": "c4@example.com"}, &eb)
	if eb.Code != "contact_limit_reached" {
		t.Fatalf("subscribe over limit: %+v", eb)
	}
	e.mustCall(t, 200, "POST", "/api/v1/lists/"+l.ID+"/subscribe", key, map[string]any{"email": "c2@example.com"}, nil)
	// The hosted form too.
	st, _ := e.raw(t, "POST", "/forms/"+l.ID, "", "application/x-www-form-urlencoded", "email=c5%40example.com", nil)
	if st != 403 {
		t.Fatalf("form over limit: %d", st)
	}
	if n := e.contactsOf(t, ws); n != 3 {
		t.Fatalf("contacts: %d", n)
	}
	if n := len(ofType(e.events(t, ws), schemas.TypeContactCreated)); n != 3 {
		t.Fatalf("created events: %d", n)
	}
}

func TestContactLimitUnderConcurrencyHasNoOvershoot(t *testing.T) {
	e := start(t)
	limit := int64(10)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{ContactLimit: &limit, RateMultiplier: 10})
	other := contacts.NewStore(e.pool)
	t.Cleanup(other.Close)
	l := e.list(t, ws, "L", false)

	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for i := 0; i < 45; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			email := fmt.Sprintf("n%02d@example.com", i)
			var created bool
			var err error
			switch i % 3 {
			case 0: // HTTP upsert
				var r upsertResp
				st := e.call(t, "POST", "/api/v1/contacts", key, map[string]any{"email": email}, &r)
				switch st {
				case 201:
					created = true
				case 403:
					err = contacts.ErrContactLimit
				default:
					t.Errorf("status %d", st)
					return
				}
			case 1: // "another process"
				var r contacts.UpsertResult
				r, err = other.Upsert(context.Background(), ws, contacts.UpsertInput{Email: email})
				created = r.Created
			default: // subscribe creating the contact
				st := e.call(t, "POST", "/api/v1/lists/"+l.ID+"/subscribe", key, map[string]any{"email": email}, nil)
				switch st {
				case 200:
					created = true
				case 403:
					err = contacts.ErrContactLimit
				default:
					t.Errorf("subscribe status %d", st)
					return
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == contacts.ErrContactLimit:
				refused++
			case err != nil:
				t.Error(err)
			case created:
				ok++
			}
		}(i)
	}
	wg.Wait()
	if ok != 10 || refused != 35 {
		t.Fatalf("%d created, %d refused; want 10 and 35", ok, refused)
	}
	if n := e.contactsOf(t, ws); n != 10 {
		t.Fatalf("%d contacts, want 10", n)
	}
	if n := e.total(t, ws); n != 10 {
		t.Fatalf("contact total %d", n)
	}
}

func TestScopes(t *testing.T) {
	e := start(t)
	_, readKey := e.ws(t, ingesttest.WorkspaceOpts{Scopes: []string{"contacts:read"}})
	_, writeKey := e.ws(t, ingesttest.WorkspaceOpts{Scopes: []string{"contacts:write"}})
	type scoped struct {
		errBody
		RequiredScope string `json:"requiredScope"`
	}
	for _, tc := range []struct {
		method, path, key, scope string
		body                     any
	}{
		{"POST", "/api/v1/contacts", readKey, "contacts:write", map[string]any{"email": "a@example.com"}},
		{"POST", "/api/v1/lists/x/subscribe", readKey, "contacts:write", map[string]any{"email": "a@example.com"}},
		{"POST", "/api/v1/lists/x/unsubscribe", readKey, "contacts:write", map[string]any{"email": "a@example.com"}},
		{"GET", "/api/v1/contacts", writeKey, "contacts:read", nil},
		{"GET", "/api/v1/contacts/search?email=a@example.com", writeKey, "contacts:read", nil},
		{"GET", "/api/v1/lists", writeKey, "contacts:read", nil},
	} {
		var b scoped
		e.mustCall(t, 403, tc.method, tc.path, tc.key, tc.body, &b)
		if b.Code != "insufficient_scope" || b.RequiredScope != tc.scope {
			t.Fatalf("%s %s: %+v", tc.method, tc.path, b)
		}
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts", readKey, nil, nil)
	e.mustCall(t, 201, "POST", "/api/v1/contacts", writeKey, map[string]any{"email": "a@example.com"}, nil)
	if st, _ := e.Do("GET", "/api/v1/contacts", "", nil); st != 401 {
		t.Fatalf("no key: %d", st)
	}
}

func TestRateLimitSixtyPerMinutePerEndpoint(t *testing.T) {
	e := start(t)
	_, key := e.ws(t, ingesttest.WorkspaceOpts{})
	ingesttest.AwayFromMinuteEnd(t, 20*time.Second) // all 61 calls in one window
	for i := 0; i < 60; i++ {
		e.mustCall(t, 200, "GET", "/api/v1/lists", key, nil, nil)
	}
	st, data := e.Do("GET", "/api/v1/lists", key, nil)
	if st != 429 || strings.Contains(string(data), "code") {
		t.Fatalf("61st call: %d %s", st, data)
	}
	// Each endpoint has its own counter.
	e.mustCall(t, 200, "GET", "/api/v1/contacts", key, nil, nil)
}

func TestRequestLogNamesTheContact(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	var r upsertResp
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": "logged@example.com"}, &r)
	logs := e.RequestLogs(t, ws)
	if len(logs) != 1 || logs[0].Status != 201 || !reflect.DeepEqual(logs[0].Produced.ContactIDs, []string{r.ID}) {
		t.Fatalf("request log: %+v", logs)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func assertJSON(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func mustDecode(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}

// ofKey keeps the envelopes with one partition key.
func ofKey(envs []schemas.Envelope, key string) []schemas.Envelope {
	var out []schemas.Envelope
	for _, e := range envs {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

func types(evs []schemas.Envelope) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	sort.Strings(out)
	return out
}
