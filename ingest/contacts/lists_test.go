package contacts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"sync"
	"testing"

	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
	"sendstream/schemas"
)

type subResp struct {
	Success   bool   `json:"success"`
	ContactID string `json:"contactId"`
	ListID    string `json:"listId"`
	Status    string `json:"status"`
	Created   bool   `json:"created"`
}

type unsubResp struct {
	Success   bool    `json:"success"`
	Removed   bool    `json:"removed"`
	ContactID *string `json:"contactId"`
	ListID    string  `json:"listId"`
}

// search returns the contact with its lists, or nil.
func (e *env) search(t *testing.T, key, email string) *contacts.ContactWithLists {
	t.Helper()
	st, data := e.Do("GET", "/api/v1/contacts/search?email="+url.QueryEscape(email), key, nil)
	if st != 200 {
		t.Fatalf("search %s: %d %s", email, st, data)
	}
	if string(data) == "null" {
		return nil
	}
	var c contacts.ContactWithLists
	mustDecode(t, data, &c)
	return &c
}

// membership returns the status of email's membership of list ("" none).
func (e *env) membership(t *testing.T, key, email, list string) string {
	t.Helper()
	c := e.search(t, key, email)
	if c == nil {
		return ""
	}
	for _, m := range c.Lists {
		if m.ID == list {
			return m.Status
		}
	}
	return ""
}

// listPayloads decodes the membership events of one type for a contact.
func listPayloads(t *testing.T, evs []schemas.Envelope, typ, contactID string) []schemas.ListMembershipPayload {
	t.Helper()
	var out []schemas.ListMembershipPayload
	for _, env := range ofType(evs, typ) {
		var p schemas.ListMembershipPayload
		mustDecode(t, env.Payload, &p)
		if p.ContactID == contactID {
			out = append(out, p)
		}
	}
	return out
}

// TestMembershipTransitions covers every row of spec table 3.2 driven by
// the API (the confirmation click row is in the double opt-in tests).
func TestMembershipTransitions(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{RateMultiplier: 10})
	news := e.list(t, ws, "Newsletter", true) // double opt-in: API subscribe must not mail
	other := e.list(t, ws, "Product updates", false)
	subPath := "/api/v1/lists/" + news.ID + "/subscribe"
	unsubPath := "/api/v1/lists/" + news.ID + "/unsubscribe"

	// Row 1: no membership -> subscribe -> ACTIVE; creates the contact
	// (ACTIVE, source api); CONTACT_ADDED_TO_LIST; no opt-in mail.
	var s subResp
	e.mustCall(t, 200, "POST", subPath, key, map[string]any{"email": "Row1@Example.com", "firstName": "Rowan"}, &s)
	if !s.Success || !s.Created || s.Status != "ACTIVE" || s.ListID != news.ID || s.ContactID == "" {
		t.Fatalf("subscribe new: %+v", s)
	}
	c := e.search(t, key, "row1@example.com")
	if c == nil || c.ID != s.ContactID || c.Status != "ACTIVE" || deref(c.Source) != "api" || deref(c.FirstName) != "Rowan" {
		t.Fatalf("created contact: %+v", c)
	}
	if len(c.Lists) != 1 || c.Lists[0].Status != "ACTIVE" || c.Lists[0].Name != "Newsletter" {
		t.Fatalf("memberships: %+v", c.Lists)
	}
	evs := e.events(t, ws)
	added := listPayloads(t, evs, schemas.TypeContactAddedToList, c.ID)
	if len(added) != 1 || added[0].ListID != news.ID || added[0].ListName != "Newsletter" || added[0].Email != "row1@example.com" || added[0].Status != "ACTIVE" {
		t.Fatalf("CONTACT_ADDED_TO_LIST: %+v", added)
	}
	if n := len(listPayloads(t, evs, schemas.TypeContactJoinedList, c.ID)); n != 1 {
		t.Fatalf("joined-list events: %d", n)
	}
	if n := len(ofType(evs, schemas.TypeOptInRequested)); n != 0 {
		t.Fatalf("API subscribe asked for %d opt-in mails", n)
	}
	if n := len(ofType(evs, schemas.TypeContactCreated)); n != 1 {
		t.Fatalf("CONTACT_CREATED: %d", n)
	}

	// An existing contact subscribed by email or id keeps its fields.
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": "kept@example.com", "firstName": "Kept"}, nil)
	e.mustCall(t, 200, "POST", subPath, key, map[string]any{"email": "kept@example.com", "firstName": "Changed"}, &s)
	if s.Created || s.Status != "ACTIVE" {
		t.Fatalf("subscribe existing: %+v", s)
	}
	if kc := e.search(t, key, "kept@example.com"); deref(kc.FirstName) != "Kept" {
		t.Fatalf("subscribe changed the contact: %+v", kc)
	}
	e.mustCall(t, 200, "POST", "/api/v1/lists/"+other.ID+"/subscribe", key, map[string]any{"contactId": c.ID}, &s)
	if s.Created || s.ContactID != c.ID || s.Status != "ACTIVE" {
		t.Fatalf("subscribe by id: %+v", s)
	}

	// ACTIVE -> subscribe again: stays ACTIVE, no new event.
	e.mustCall(t, 200, "POST", subPath, key, map[string]any{"email": "row1@example.com"}, &s)
	if s.Status != "ACTIVE" || s.Created {
		t.Fatalf("resubscribe: %+v", s)
	}

	// Row 3: existing membership -> unsubscribe -> UNSUBSCRIBED; row kept;
	// contact and other lists untouched; CONTACT_REMOVED_FROM_LIST.
	var u unsubResp
	e.mustCall(t, 200, "POST", unsubPath, key, map[string]any{"email": "row1@example.com"}, &u)
	if !u.Success || !u.Removed || u.ContactID == nil || *u.ContactID != c.ID || u.ListID != news.ID {
		t.Fatalf("unsubscribe: %+v", u)
	}
	c = e.search(t, key, "row1@example.com")
	got := map[string]string{}
	for _, m := range c.Lists {
		got[m.Name] = m.Status
	}
	if c.Status != "ACTIVE" || !reflect.DeepEqual(got, map[string]string{"Newsletter": "UNSUBSCRIBED", "Product updates": "ACTIVE"}) {
		t.Fatalf("after unsubscribe: status %s lists %v", c.Status, got)
	}
	removed := listPayloads(t, e.events(t, ws), schemas.TypeContactRemovedFromList, c.ID)
	if len(removed) != 1 || removed[0].ListID != news.ID || removed[0].ListName != "Newsletter" || removed[0].Status != "UNSUBSCRIBED" {
		t.Fatalf("CONTACT_REMOVED_FROM_LIST: %+v", removed)
	}

	// Row 4: nothing to unsubscribe -> removed false (already unsubscribed,
	// a contact not on the list, no such contact, by id too).
	e.mustCall(t, 200, "POST", unsubPath, key, map[string]any{"email": "row1@example.com"}, &u)
	if u.Removed || u.ContactID == nil {
		t.Fatalf("second unsubscribe: %+v", u)
	}
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": "stranger@example.com"}, nil)
	e.mustCall(t, 200, "POST", "/api/v1/lists/"+other.ID+"/unsubscribe", key, map[string]any{"email": "stranger@example.com"}, &u)
	if u.Removed || u.ContactID == nil {
		t.Fatalf("not on list: %+v", u)
	}
	e.mustCall(t, 200, "POST", unsubPath, key, map[string]any{"email": "nobody@example.com"}, &u)
	if u.Removed || u.ContactID != nil || u.ListID != news.ID {
		t.Fatalf("no such contact: %+v", u)
	}
	e.mustCall(t, 200, "POST", unsubPath, key, map[string]any{"contactId": "0000"}, &u)
	if u.Removed || u.ContactID != nil {
		t.Fatalf("no such contact id: %+v", u)
	}
	if n := len(ofType(e.events(t, ws), schemas.TypeContactRemovedFromList)); n != 1 {
		t.Fatalf("removed events after no-op unsubscribes: %d", n)
	}
	// Leaving a list changes the membership, never the contact's status:
	// no CONTACT_UNSUBSCRIBED (the unsubscribe link of a marketing email
	// fires that).
	if n := len(ofType(e.events(t, ws), schemas.TypeContactUnsubscribed)); n != 0 {
		t.Fatalf("list unsubscribes announced %d contact.unsubscribed.v1", n)
	}

	// Row 2: UNSUBSCRIBED -> subscribe -> ACTIVE with the same side effects.
	e.mustCall(t, 200, "POST", subPath, key, map[string]any{"email": "row1@example.com"}, &s)
	if s.Status != "ACTIVE" || s.Created || e.membership(t, key, "row1@example.com", news.ID) != "ACTIVE" {
		t.Fatalf("resubscribe after unsubscribe: %+v", s)
	}
	evs = e.events(t, ws)
	if n := len(listPayloads(t, evs, schemas.TypeContactAddedToList, c.ID)); n != 3 { // news twice, other once
		t.Fatalf("CONTACT_ADDED_TO_LIST for row1: %d, want 3", n)
	}
	if n := len(listPayloads(t, evs, schemas.TypeContactJoinedList, c.ID)); n != 3 {
		t.Fatalf("joined-list events for row1: %d, want 3", n)
	}
	if n := len(ofType(evs, schemas.TypeOptInRequested)); n != 0 {
		t.Fatalf("opt-in mails: %d", n)
	}

	// PENDING -> subscribe (API) -> ACTIVE (a sign-up through the form first).
	st, body := e.raw(t, "POST", "/forms/"+news.ID, "", "application/x-www-form-urlencoded", "email=pending%40example.com", nil)
	if st != 200 || e.membership(t, key, "pending@example.com", news.ID) != "PENDING" {
		t.Fatalf("form sign-up: %d %s", st, body)
	}
	e.mustCall(t, 200, "POST", subPath, key, map[string]any{"email": "pending@example.com"}, &s)
	if s.Status != "ACTIVE" || e.membership(t, key, "pending@example.com", news.ID) != "ACTIVE" {
		t.Fatalf("subscribe pending: %+v", s)
	}
}

func TestUnknownListIs404AndWritesNothing(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	otherWS, _ := e.ws(t, ingesttest.WorkspaceOpts{})
	foreign := e.list(t, otherWS, "Not yours", false)
	for _, id := range []string{"nope", foreign.ID} {
		for _, op := range []string{"subscribe", "unsubscribe"} {
			var eb errBody
			e.mustCall(t, 404, "POST", "/api/v1/lists/"+id+"/"+op, key, map[string]any{"email": "x@example.com"}, &eb)
			if eb.Code != "list_not_found" {
				t.Fatalf("%s %s: %+v", op, id, eb)
			}
		}
		var eb errBody
		e.mustCall(t, 404, "GET", "/api/v1/contacts?listId="+id, key, nil, &eb)
		if eb.Code != "list_not_found" {
			t.Fatalf("page listId %s: %+v", id, eb)
		}
	}
	if n := e.contactsOf(t, ws); n != 0 {
		t.Fatalf("404s wrote %d contacts", n)
	}
	if n := len(e.events(t, ws)); n != 0 {
		t.Fatalf("404s published %d envelopes", n)
	}
}

func TestSubscribeBadInput(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	l := e.list(t, ws, "L", false)
	path := "/api/v1/lists/" + l.ID + "/subscribe"
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
		fields     []string
	}{
		{"empty", ``, 400, "validation_error", nil},
		{"not JSON", `{`, 400, "invalid_json", nil},
		{"no target", `{}`, 400, "validation_error", []string{"email"}},
		{"malformed email", `{"email":"x@"}`, 400, "validation_error", []string{"email"}},
		{"both", `{"email":"a@example.com","contactId":"abc"}`, 400, "validation_error", []string{"contactId"}},
		{"contactId number", `{"contactId":12}`, 400, "validation_error", []string{"contactId", "email"}},
		{"firstName type", `{"email":"a@example.com","firstName":[]}`, 400, "validation_error", []string{"firstName"}},
		{"unknown contactId", `{"contactId":"abc"}`, 404, "contact_not_found", []string{"contactId"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, data := e.raw(t, "POST", path, key, "application/json", tc.body, nil)
			var eb errBody
			_ = json.Unmarshal(data, &eb)
			if st != tc.status || eb.Code != tc.code || !reflect.DeepEqual(eb.Fields, tc.fields) {
				t.Fatalf("%d %s; want %d %s %v", st, data, tc.status, tc.code, tc.fields)
			}
		})
	}
	if n := e.contactsOf(t, ws); n != 0 {
		t.Fatalf("bad subscribes wrote %d contacts", n)
	}
	if n := e.count(t, "SELECT contact_count FROM lists WHERE id = $1", l.ID); n != 0 {
		t.Fatalf("contactCount %d", n)
	}
}

func TestListsCountEveryMembership(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{RateMultiplier: 10})
	var lr struct {
		Lists []contacts.List `json:"lists"`
	}
	e.mustCall(t, 200, "GET", "/api/v1/lists", key, nil, &lr)
	if lr.Lists == nil || len(lr.Lists) != 0 {
		t.Fatalf("no lists: %+v", lr)
	}
	a := e.list(t, ws, "Alpha", true)
	b := e.list(t, ws, "Beta", false)
	sub := func(l, email string) {
		e.mustCall(t, 200, "POST", "/api/v1/lists/"+l+"/subscribe", key, map[string]any{"email": email}, nil)
	}
	sub(a.ID, "one@example.com")
	sub(a.ID, "two@example.com")
	e.mustCall(t, 200, "POST", "/api/v1/lists/"+a.ID+"/unsubscribe", key, map[string]any{"email": "two@example.com"}, nil)
	if st, _ := e.raw(t, "POST", "/forms/"+a.ID, "", "application/x-www-form-urlencoded", "email=three%40example.com", nil); st != 200 {
		t.Fatal("form sign-up failed")
	}
	sub(b.ID, "one@example.com")
	sub(a.ID, "one@example.com") // no new membership
	e.mustCall(t, 200, "GET", "/api/v1/lists", key, nil, &lr)
	if len(lr.Lists) != 2 {
		t.Fatalf("lists: %+v", lr)
	}
	if l := lr.Lists[0]; l.ID != a.ID || l.Name != "Alpha" || !l.DoubleOptIn || l.ContactCount != 3 {
		t.Fatalf("Alpha (active + unsubscribed + pending): %+v", l)
	}
	if l := lr.Lists[1]; l.ID != b.ID || l.DoubleOptIn || l.ContactCount != 1 {
		t.Fatalf("Beta: %+v", l)
	}
	// Another workspace sees none of them.
	_, key2 := e.ws(t, ingesttest.WorkspaceOpts{})
	e.mustCall(t, 200, "GET", "/api/v1/lists", key2, nil, &lr)
	if len(lr.Lists) != 0 {
		t.Fatalf("foreign lists visible: %+v", lr)
	}
}

func TestSearch(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{RateMultiplier: 10})
	e.field(t, ws, "plan", "string")
	a := e.list(t, ws, "A", false)
	b := e.list(t, ws, "B", false)
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": "found@example.com", "customFields": map[string]any{"plan": "pro"}}, nil)
	e.mustCall(t, 200, "POST", "/api/v1/lists/"+a.ID+"/subscribe", key, map[string]any{"email": "found@example.com"}, nil)
	e.mustCall(t, 200, "POST", "/api/v1/lists/"+b.ID+"/subscribe", key, map[string]any{"email": "found@example.com"}, nil)
	e.mustCall(t, 200, "POST", "/api/v1/lists/"+b.ID+"/unsubscribe", key, map[string]any{"email": "found@example.com"}, nil)

	c := e.search(t, key, "  FOUND@example.com ")
	if c == nil || c.Email != "found@example.com" {
		t.Fatalf("search: %+v", c)
	}
	assertJSON(t, c.CustomFields, `{"plan":"pro"}`)
	if len(c.Lists) != 2 || c.Lists[0].ID != a.ID || c.Lists[0].Status != "ACTIVE" || c.Lists[1].Status != "UNSUBSCRIBED" || c.Lists[1].Name != "B" {
		t.Fatalf("lists: %+v", c.Lists)
	}
	if e.search(t, key, "missing@example.com") != nil {
		t.Fatal("missing contact found")
	}
	// Another workspace does not see it.
	_, key2 := e.ws(t, ingesttest.WorkspaceOpts{})
	if e.search(t, key2, "found@example.com") != nil {
		t.Fatal("foreign contact found")
	}
	for _, q := range []string{"", "?email=", "?email=nope", "?email=a%40b"} {
		var eb errBody
		e.mustCall(t, 400, "GET", "/api/v1/contacts/search"+q, key, nil, &eb)
		if !reflect.DeepEqual(eb.Fields, []string{"email"}) {
			t.Fatalf("search %q: %+v", q, eb)
		}
	}
}

func TestListContactsPagingAndFilters(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{RateMultiplier: 10})
	var ids []string // creation order
	for i := 0; i < 7; i++ {
		var r upsertResp
		e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": fmt.Sprintf("p%d@example.com", i)}, &r)
		ids = append(ids, r.ID)
	}
	var p pageResp
	e.mustCall(t, 200, "GET", "/api/v1/contacts?limit=3&page=1", key, nil, &p)
	if p.Pagination.Page != 1 || p.Pagination.Limit != 3 || p.Pagination.Total != 7 || p.Pagination.TotalPages != 3 {
		t.Fatalf("pagination: %+v", p.Pagination)
	}
	if got := idsOf(p.Contacts); !reflect.DeepEqual(got, []string{ids[6], ids[5], ids[4]}) {
		t.Fatalf("page 1 not newest first: %v", got)
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts?limit=3&page=3", key, nil, &p)
	if got := idsOf(p.Contacts); !reflect.DeepEqual(got, []string{ids[0]}) {
		t.Fatalf("page 3: %v", got)
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts?limit=3&page=4", key, nil, &p)
	if len(p.Contacts) != 0 || p.Pagination.Total != 7 || p.Contacts == nil {
		t.Fatalf("past the end: %+v", p)
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts", key, nil, &p)
	if p.Pagination.Limit != 50 || p.Pagination.Page != 1 || len(p.Contacts) != 7 {
		t.Fatalf("defaults: %+v", p.Pagination)
	}

	// Status filter (a status change by anyone keeps the counts exact).
	if _, err := e.pool.Exec(context.Background(), "UPDATE contacts SET status = 'BOUNCED' WHERE id = ANY($1)", []string{ids[1], ids[4]}); err != nil {
		t.Fatal(err)
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts?status=BOUNCED", key, nil, &p)
	if got := idsOf(p.Contacts); p.Pagination.Total != 2 || !reflect.DeepEqual(got, []string{ids[4], ids[1]}) {
		t.Fatalf("BOUNCED: %+v", p)
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts?status=active&limit=2&page=2", key, nil, &p)
	if got := idsOf(p.Contacts); p.Pagination.Total != 5 || p.Pagination.TotalPages != 3 || !reflect.DeepEqual(got, []string{ids[3], ids[2]}) {
		t.Fatalf("ACTIVE page 2: %+v", p)
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts?status=PENDING", key, nil, &p)
	if p.Pagination.Total != 0 || len(p.Contacts) != 0 || p.Pagination.TotalPages != 0 {
		t.Fatalf("PENDING: %+v", p)
	}

	// listId filter: every membership status counts; combined with status.
	l := e.list(t, ws, "L", false)
	for _, i := range []int{0, 1, 5} {
		e.mustCall(t, 200, "POST", "/api/v1/lists/"+l.ID+"/subscribe", key, map[string]any{"contactId": ids[i]}, nil)
	}
	e.mustCall(t, 200, "POST", "/api/v1/lists/"+l.ID+"/unsubscribe", key, map[string]any{"contactId": ids[5]}, nil)
	e.mustCall(t, 200, "GET", "/api/v1/contacts?listId="+l.ID, key, nil, &p)
	if got := idsOf(p.Contacts); p.Pagination.Total != 3 || !reflect.DeepEqual(got, []string{ids[5], ids[1], ids[0]}) {
		t.Fatalf("listId: %+v", p)
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts?listId="+l.ID+"&status=ACTIVE", key, nil, &p)
	if got := idsOf(p.Contacts); p.Pagination.Total != 2 || !reflect.DeepEqual(got, []string{ids[5], ids[0]}) {
		t.Fatalf("listId+ACTIVE: %+v", p)
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts?listId="+l.ID+"&status=BOUNCED&limit=1", key, nil, &p)
	if got := idsOf(p.Contacts); p.Pagination.Total != 1 || !reflect.DeepEqual(got, []string{ids[1]}) {
		t.Fatalf("listId+BOUNCED: %+v", p)
	}

	// Bad parameters.
	for _, tc := range []struct {
		q, code string
		fields  []string
	}{
		{"limit=0", "validation_error", []string{"limit"}},
		{"limit=101", "validation_error", []string{"limit"}},
		{"limit=ten", "validation_error", []string{"limit"}},
		{"limit=-5", "validation_error", []string{"limit"}},
		{"page=0", "validation_error", []string{"page"}},
		{"page=-1", "validation_error", []string{"page"}},
		{"page=1.5", "validation_error", []string{"page"}},
		{"page=0&limit=0", "validation_error", []string{"page", "limit"}},
		{"status=GONE", "invalid_status", []string{"status"}},
	} {
		var eb errBody
		e.mustCall(t, 400, "GET", "/api/v1/contacts?"+tc.q, key, nil, &eb)
		if eb.Code != tc.code || !reflect.DeepEqual(eb.Fields, tc.fields) {
			t.Fatalf("%s: %+v", tc.q, eb)
		}
	}
	e.mustCall(t, 200, "GET", "/api/v1/contacts?limit=1", key, nil, nil)
	e.mustCall(t, 200, "GET", "/api/v1/contacts?limit=100", key, nil, nil)
}

// TestDeepPagesMatchTheTruth seeds a few thousand contacts (several
// 1024-wide counting buckets), moves some between statuses and lists, and
// checks pages at every depth against a plain ORDER BY ... OFFSET query.
func TestDeepPagesMatchTheTruth(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{Plan: "enterprise"})
	const n = 2600
	ctx := context.Background()
	// Make the seeded seqs straddle a 32768-wide (coarse) bucket boundary.
	if _, err := e.pool.Exec(ctx, `SELECT setval('contacts_seq', ((nextval('contacts_seq') >> 15) + 1 << 15) - 1300)`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := e.store.Upsert(ctx, ws, contacts.UpsertInput{Email: fmt.Sprintf("deep%05d@example.com", i)}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if _, err := e.pool.Exec(ctx, `UPDATE contacts SET status = CASE WHEN seq % 3 = 0 THEN 'UNSUBSCRIBED' ELSE 'BOUNCED' END
		WHERE workspace_id = $1 AND seq % 7 IN (0, 3)`, ws); err != nil {
		t.Fatal(err)
	}
	l := e.list(t, ws, "Deep", false)
	lr, err := e.store.List(ctx, ws, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := e.pool.Query(ctx, "SELECT id FROM contacts WHERE workspace_id = $1 AND seq % 2 = 0", ws)
	if err != nil {
		t.Fatal(err)
	}
	var members []string
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		members = append(members, id)
	}
	rows.Close()
	for _, id := range members {
		if _, err := e.store.Subscribe(ctx, lr, contacts.Target{ID: id}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A status change after joining moves the list's counts too.
	if _, err := e.pool.Exec(ctx, `UPDATE contacts SET status = 'COMPLAINED' WHERE workspace_id = $1 AND seq % 11 = 0`, ws); err != nil {
		t.Fatal(err)
	}

	truth := func(where string, args []any, offset, limit int) ([]string, int64) {
		q := "SELECT c.id FROM contacts c WHERE c.workspace_id = $1 " + where + " ORDER BY c.seq DESC"
		rows, err := e.pool.Query(ctx, q, append([]any{ws}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var all []string
		for rows.Next() {
			var id string
			_ = rows.Scan(&id)
			all = append(all, id)
		}
		total := int64(len(all))
		if offset > len(all) {
			return []string{}, total
		}
		all = all[offset:]
		if len(all) > limit {
			all = all[:limit]
		}
		return all, total
	}
	inList := "AND EXISTS (SELECT 1 FROM memberships m WHERE m.contact_id = c.id AND m.list_id = $2)"
	for _, f := range []struct {
		query, where string
		args         []any
	}{
		{"", "", nil},
		{"&status=ACTIVE", "AND c.status = $2", []any{"ACTIVE"}},
		{"&status=BOUNCED", "AND c.status = $2", []any{"BOUNCED"}},
		{"&status=COMPLAINED", "AND c.status = $2", []any{"COMPLAINED"}},
		{"&listId=" + l.ID, inList, []any{l.ID}},
		{"&listId=" + l.ID + "&status=UNSUBSCRIBED", inList + " AND c.status = $3", []any{l.ID, "UNSUBSCRIBED"}},
		{"&listId=" + l.ID + "&status=ACTIVE", inList + " AND c.status = $3", []any{l.ID, "ACTIVE"}},
	} {
		for _, pg := range []struct{ page, limit int }{{1, 100}, {2, 100}, {10, 100}, {11, 100}, {13, 100}, {27, 100}, {40, 100}, {1, 1}, {1023, 1}, {1024, 1}, {1025, 2}, {7, 37}, {200, 10}} {
			var p pageResp
			e.mustCall(t, 200, "GET", fmt.Sprintf("/api/v1/contacts?page=%d&limit=%d%s", pg.page, pg.limit, f.query), key, nil, &p)
			want, total := truth(f.where, f.args, (pg.page-1)*pg.limit, pg.limit)
			if got := idsOf(p.Contacts); !reflect.DeepEqual(got, want) || p.Pagination.Total != total {
				t.Fatalf("%s page %d limit %d: total %d (want %d), ids %d differ:\n got  %.300v\n want %.300v",
					f.query, pg.page, pg.limit, p.Pagination.Total, total, len(got), got, want)
			}
		}
	}
	if got := e.count(t, "SELECT coalesce(sum(n),0) FROM contact_buckets WHERE workspace_id = $1 AND status = '' AND bucket >= 0", ws); got != n {
		t.Fatalf("bucket sum %d, want %d", got, n)
	}
	// The counters kept by the store and the triggers equal a recount.
	snapshot := func() string {
		var s string
		err := e.pool.QueryRow(ctx, `SELECT coalesce(string_agg(k, ',' ORDER BY k), '') FROM (
			SELECT 'c/' || status || '/' || bucket || '=' || sum(n) AS k FROM contact_buckets WHERE workspace_id = $1
			 GROUP BY status, bucket HAVING sum(n) <> 0
			UNION ALL SELECT 'l/' || status || '/' || bucket || '=' || n FROM list_buckets WHERE list_id = $2 AND n <> 0
			UNION ALL SELECT 'count=' || contact_count FROM lists WHERE id = $2
			UNION ALL SELECT 'm/' || count(*) FROM memberships m JOIN contacts c ON c.id = m.contact_id
			           WHERE m.list_id = $2 AND m.contact_status = c.status) x`, ws, l.ID).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := snapshot()
	if err := e.store.RebuildCounters(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(); after != before {
		t.Fatalf("maintained counters differ from a recount:\n kept    %.400s\n recount %.400s", before, after)
	}
}

func idsOf(cs []contacts.Contact) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}
