package contacts_test

import (
	"context"
	"fmt"
	"testing"

	"sendstream/ingest/contacts"
	"sendstream/ingest/ingesttest"
)

// TestUpsertUpdatesKeepTheRowOnItsPage pins 0089_contacts_fillfactor.sql:
// a page filled by creations keeps room, so an upsert that changes a known
// contact's name and custom fields is a heap-only (HOT) update: the new row
// version stays on the row's page and no index gets an entry. At a fill
// factor of 100 the page is full and every such update moves the row to
// another page.
func TestUpsertUpdatesKeepTheRowOnItsPage(t *testing.T) {
	e := start(t)
	ws, key := e.ws(t, ingesttest.WorkspaceOpts{})
	e.field(t, ws, "plan", "string")
	const n = 150
	// Created through the store (the statement the API runs; the endpoint's
	// rate limit would hold back 150 calls).
	first, country := "Before", "DE"
	for i := range n {
		if _, err := e.store.Upsert(context.Background(), ws, contacts.UpsertInput{
			Email:  fmt.Sprintf("hot-%03d@example.com", i),
			Fields: contacts.Fields{FirstName: &first, Country: &country, CustomFields: map[string]any{"plan": "free"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	// One contact of each page our creations filled: a page holding at
	// least ten of them and not the last page written (which may have room
	// at any fill factor).
	before := e.pages(t, ws)
	last := int64(-1)
	count := map[int64]int{}
	lowest := map[int64]string{}
	for email, page := range before {
		count[page]++
		last = max(last, page)
		if cur, ok := lowest[page]; !ok || email < cur {
			lowest[page] = email
		}
	}
	var probes []string
	for page, c := range count {
		if c >= 10 && page != last {
			probes = append(probes, lowest[page])
		}
	}
	if len(probes) < 2 {
		t.Fatalf("creations filled %d pages (%v); the test needs at least two full ones", len(probes), count)
	}
	for _, email := range probes {
		var r upsertResp
		e.mustCall(t, 200, "POST", "/api/v1/contacts", key, map[string]any{
			"email": email, "firstName": "After", "customFields": map[string]any{"plan": "pro"},
		}, &r)
		if r.Created || deref(r.Contact.FirstName) != "After" {
			t.Fatalf("update of %s: %+v", email, r)
		}
	}
	after := e.pages(t, ws)
	for _, email := range probes {
		if after[email] != before[email] {
			t.Errorf("%s moved from page %d to page %d on update: not a HOT update", email, before[email], after[email])
		}
	}
}

// pages maps each contact of ws (by email) to the heap page its current
// row version is on.
func (e *env) pages(t *testing.T, ws string) map[string]int64 {
	t.Helper()
	rows, err := e.pool.Query(context.Background(),
		`SELECT email, (ctid::text::point)[0]::bigint FROM contacts WHERE workspace_id = $1`, ws)
	if err != nil {
		t.Fatalf("pages: %v", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var email string
		var page int64
		if err := rows.Scan(&email, &page); err != nil {
			t.Fatalf("pages: %v", err)
		}
		out[email] = page
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("pages: %v", err)
	}
	return out
}
