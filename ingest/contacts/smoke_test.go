package contacts_test

import (
	"testing"

	"sendstream/ingest/ingesttest"
)

func TestOpenAPIDocumentIsValid(t *testing.T) {
	if errs := ingesttest.ValidateDocument(); len(errs) > 0 {
		t.Fatalf("OpenAPI document invalid:\n%v", errs)
	}
}

func TestSmoke(t *testing.T) {
	e := start(t)
	_, key := e.ws(t, ingesttest.WorkspaceOpts{})
	var r upsertResp
	e.mustCall(t, 201, "POST", "/api/v1/contacts", key, map[string]any{"email": " Ann@Example.COM ", "firstName": "Ann"}, &r)
	if !r.Created || r.Contact.Email != "ann@example.com" {
		t.Fatalf("got %+v", r)
	}
	var p pageResp
	e.mustCall(t, 200, "GET", "/api/v1/contacts", key, nil, &p)
	if p.Pagination.Total != 1 || len(p.Contacts) != 1 {
		t.Fatalf("page %+v", p)
	}
}
